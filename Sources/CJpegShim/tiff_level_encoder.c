/*
 * tiff_level_encoder.c: a level's RGBA rows into its JPEG tiles (cjs_tiff.h): one libjpeg compressor
 * per tile column, each fed its slice of every row as the row comes (libjpeg buffers an MCU row), so
 * no tile row of pixels is ever held. Tiles are abbreviated (their tables are the level's JPEGTables)
 * and padded to the tile size by repeating the last column and row. A level of WebP tiles holds a
 * tile row of RGBA instead (libwebp encodes whole pictures) and encodes each tile as its last row
 * comes. Also the pyramid's writer strategy for TIFF levels (tiff_level_writer_methods).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cweb_encoders.h>

#include "errors.h"
#include "tile_codec.h"
#include "tiff_writer.h"
#include "writer.h"

typedef struct {
    struct jpeg_compress_struct cinfo;
    cjs_bytes_destination dest;
    cjs_bytes bytes;
    int created;
} column_compressor;

struct cjs_tiff_level_encoder {
    cjs_tiff_writer *writer;
    uint32_t level;
    cjs_tiff_level desc;
    uint32_t tile_size, columns;
    cjs_error_mgr err;
    column_compressor *compressors;
    uint8_t *edge;       /* the last column's padded slice of a row */
    uint8_t *last_row;   /* the level's last row, repeated below it */
    uint32_t rows_pushed;
    int failed;
    int webp;
    /* WebP levels: a tile row of RGBA, `columns` tiles wide, padded (made at the first row). */
    uint8_t *tile_row;
};

/* Replaces the luma (0) and chroma (1) tables by CJS_TABLES_FLATTENED's at `quality`: Annex K's
   read back from libjpeg at quality 50 (a scale of 100%, the tables themselves), each entry over the
   table's first brought to the geometric mean of the two, then scaled as jpeg_set_quality scales. */
static void flatten_tables(j_compress_ptr c, int quality) {
    jpeg_set_quality(c, 50, TRUE);
    for (int slot = 0; slot < 2; slot++) {
        const JQUANT_TBL *annex_k = c->quant_tbl_ptrs[slot];
        unsigned int base[DCTSIZE2];
        double dc = annex_k->quantval[0];
        for (int i = 0; i < DCTSIZE2; i++) {
            double k = annex_k->quantval[i];
            base[i] = k <= dc ? (unsigned int)k : (unsigned int)(sqrt(k * dc) + 0.5);
        }
        jpeg_add_quant_table(c, slot, base, jpeg_quality_scaling(quality), TRUE);
    }
}

/* The settings of every compressor of a level, and of its tables. */
static void configure(j_compress_ptr c, int quality, int tables, int gray, int h, int v, uint32_t tile_size) {
    c->in_color_space = JCS_EXT_RGBX;
    c->input_components = 4;
    jpeg_set_defaults(c);
    if (tables == CJS_TABLES_FLATTENED) flatten_tables(c, quality);
    else jpeg_set_quality(c, quality, TRUE);
    jpeg_set_colorspace(c, gray ? JCS_GRAYSCALE : JCS_YCbCr);
    if (!gray) {
        c->comp_info[0].h_samp_factor = h;
        c->comp_info[0].v_samp_factor = v;
    }
    c->write_JFIF_header = FALSE;
    c->write_Adobe_marker = FALSE;
    c->image_width = c->image_height = tile_size;
}

static int valid_coding(int quality, int tables) {
    return quality >= 1 && quality <= 100 && (tables == CJS_TABLES_ANNEX_K || tables == CJS_TABLES_FLATTENED);
}

cjs_status cjs_jpeg_tables(int32_t quality, int32_t tables, int32_t gray, void **out, size_t *length) {
    if (!out || !length || !valid_coding(quality, tables)) return CJS_ERR_ARGUMENT;
    *out = NULL;
    struct jpeg_compress_struct c;
    cjs_error_mgr err;
    cjs_bytes bytes = {0};
    cjs_bytes_destination dest;
    cjs_error_init(&err, 0);
    c.err = &err.pub;
    volatile int created = 0;
    if (setjmp(err.jump)) { /* jpeg_create_compress, jpeg_set_defaults, jpeg_write_tables */
        if (created) jpeg_destroy_compress(&c);
        free(bytes.data);
        return err.pub.msg_code == JERR_OUT_OF_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
    }
    jpeg_create_compress(&c);
    created = 1;
    configure(&c, quality, tables, gray, 1, 1, 16);
    cjs_bytes_destination_init(&dest, &bytes);
    c.dest = &dest.pub;
    jpeg_write_tables(&c);
    jpeg_destroy_compress(&c);
    *out = bytes.data;
    *length = bytes.length;
    return CJS_OK;
}

void cjs_tiff_level_encoder_destroy(cjs_tiff_level_encoder *e) {
    if (!e) return;
    for (uint32_t c = 0; e->compressors && c < e->columns; c++) {
        if (e->compressors[c].created) jpeg_destroy_compress(&e->compressors[c].cinfo);
        free(e->compressors[c].bytes.data);
    }
    free(e->compressors);
    free(e->edge);
    free(e->last_row);
    free(e->tile_row);
    free(e);
}

/* Creates and configures every column's compressor; tables are never written into a tile. */
static cjs_status make_compressors(cjs_tiff_level_encoder *e, int quality, int tables) {
    int gray = e->desc.photometric == CJS_PHOTOMETRIC_GRAY;
    if (setjmp(e->err.jump)) /* jpeg_create_compress, jpeg_set_defaults, jpeg_suppress_tables */
        return e->err.pub.msg_code == JERR_OUT_OF_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
    for (uint32_t i = 0; i < e->columns; i++) {
        column_compressor *c = &e->compressors[i];
        c->cinfo.err = &e->err.pub;
        jpeg_create_compress(&c->cinfo);
        c->created = 1;
        configure(&c->cinfo, quality, tables, gray, e->desc.h_subsampling, e->desc.v_subsampling, e->tile_size);
        cjs_bytes_destination_init(&c->dest, &c->bytes);
        c->cinfo.dest = &c->dest.pub;
        jpeg_suppress_tables(&c->cinfo, TRUE);
    }
    return CJS_OK;
}

/* Whether the level's JPEGTables are the ones these compressors use. */
static int tables_match(const cjs_tiff_level *desc, int quality, int tables) {
    void *bytes = NULL;
    size_t length = 0;
    int gray = desc->photometric == CJS_PHOTOMETRIC_GRAY;
    if (cjs_jpeg_tables(quality, tables, gray, &bytes, &length) != CJS_OK) return 0;
    int same = length == desc->jpeg_tables_length && memcmp(bytes, desc->jpeg_tables, length) == 0;
    free(bytes);
    return same;
}

/* Copies `row` into line `y` of the tile row, padded right by its last pixel. */
static void hold_row(cjs_tiff_level_encoder *e, uint32_t y, const uint8_t *row) {
    size_t padded = (size_t)e->columns * e->tile_size;
    uint8_t *line = e->tile_row + (size_t)y * padded * 4;
    memcpy(line, row, (size_t)e->desc.width * 4);
    for (size_t x = e->desc.width; x < padded; x++) memcpy(line + x * 4, row + (size_t)(e->desc.width - 1) * 4, 4);
}

/* Encodes the held tile row's tiles and hands them to the writer. */
static cjs_status end_webp_tiles(cjs_tiff_level_encoder *e, uint32_t tile_row) {
    size_t stride = (size_t)e->columns * e->tile_size * 4;
    for (uint32_t c = 0; c < e->columns; c++) {
        void *bytes = NULL;
        size_t length = 0;
        cweb_status encoded = cweb_webp_encode(e->tile_row + (size_t)c * e->tile_size * 4, stride, e->tile_size, e->tile_size,
                                               e->desc.webp_quality, e->desc.webp_lossless, 4, 0, e->desc.samples == 4, NULL, 0,
                                               NULL, NULL, &bytes, &length, NULL);
        if (encoded != CWEB_OK) return encoded == CWEB_ERR_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
        cjs_status status = cjs_tiff_writer_put_tile(e->writer, e->level, c, tile_row, bytes, length);
        cweb_free(bytes);
        if (status != CJS_OK) return status == CJS_ERR_ARGUMENT ? CJS_ERR_ARGUMENT : CJS_ERR_IO;
    }
    return CJS_OK;
}

static cjs_status push_webp_row(cjs_tiff_level_encoder *e, const uint8_t *row) {
    if (!e->tile_row && !(e->tile_row = malloc((size_t)e->columns * e->tile_size * e->tile_size * 4))) {
        e->failed = 1;
        return CJS_ERR_NOMEM;
    }
    uint32_t y = e->rows_pushed % e->tile_size;
    hold_row(e, y, row);
    e->rows_pushed++;
    int last = e->rows_pushed == e->desc.height;
    if (last)
        for (uint32_t pad = y + 1; pad < e->tile_size; pad++) hold_row(e, pad, row);
    if (!last && y + 1 < e->tile_size) return CJS_OK;
    cjs_status status = end_webp_tiles(e, (e->rows_pushed - 1) / e->tile_size);
    if (status != CJS_OK) e->failed = 1;
    return status;
}

cjs_status cjs_tiff_level_encoder_create(cjs_tiff_writer *writer, uint32_t level, int32_t quality,
                                         int32_t tables, cjs_tiff_level_encoder **out) {
    if (!out) return CJS_ERR_ARGUMENT;
    *out = NULL;
    const cjs_tiff_level *desc = writer ? tiff_writer_level(writer, level) : NULL;
    int webp = desc && desc->compression == CJS_COMPRESSION_WEBP;
    if (!desc || (!webp && (!valid_coding(quality, tables) || !tables_match(desc, quality, tables)))) return CJS_ERR_ARGUMENT;
    cjs_tiff_level_encoder *e = calloc(1, sizeof *e);
    if (!e) return CJS_ERR_NOMEM;
    e->writer = writer;
    e->level = level;
    e->desc = *desc;
    e->tile_size = tiff_writer_tile_size(writer);
    e->columns = (desc->width + e->tile_size - 1) / e->tile_size;
    e->webp = webp;
    cjs_status status = CJS_OK;
    if (!webp) { /* WebP: a tile row of RGBA once rows come, nothing of libjpeg */
        cjs_error_init(&e->err, 0);
        e->compressors = calloc(e->columns, sizeof *e->compressors);
        e->edge = malloc((size_t)e->tile_size * 4);
        e->last_row = malloc((size_t)desc->width * 4);
        status = e->compressors && e->edge && e->last_row ? make_compressors(e, quality, tables) : CJS_ERR_NOMEM;
    }
    if (status != CJS_OK) {
        cjs_tiff_level_encoder_destroy(e);
        return status;
    }
    *out = e;
    return CJS_OK;
}

/* Feeds one row to every column (the last column's slice padded by its last pixel). */
static void write_row(cjs_tiff_level_encoder *e, const uint8_t *row) {
    uint32_t tile = e->tile_size;
    for (uint32_t c = 0; c < e->columns; c++) {
        JSAMPROW slice = (JSAMPROW)(uintptr_t)(row + (size_t)c * tile * 4);
        uint32_t pixels = e->desc.width - c * tile;
        if (pixels < tile) {
            memcpy(e->edge, slice, (size_t)pixels * 4);
            for (uint32_t x = pixels; x < tile; x++) memcpy(e->edge + (size_t)x * 4, slice + (size_t)(pixels - 1) * 4, 4);
            slice = e->edge;
        }
        jpeg_write_scanlines(&e->compressors[c].cinfo, &slice, 1);
    }
}

/* Ends the tile row's tiles and hands them to the writer: CJS_OK or the writer's failure. */
static cjs_status end_tiles(cjs_tiff_level_encoder *e, uint32_t tile_row) {
    for (uint32_t c = 0; c < e->columns; c++) jpeg_finish_compress(&e->compressors[c].cinfo);
    for (uint32_t c = 0; c < e->columns; c++) {
        const cjs_bytes *b = &e->compressors[c].bytes;
        cjs_status status = cjs_tiff_writer_put_tile(e->writer, e->level, c, tile_row, b->data, b->length);
        if (status != CJS_OK) return status == CJS_ERR_ARGUMENT ? CJS_ERR_ARGUMENT : CJS_ERR_IO;
    }
    return CJS_OK;
}

cjs_status cjs_tiff_level_encoder_push_row(cjs_tiff_level_encoder *e, const void *row) {
    if (e->failed) return CJS_ERR_STATE;
    if (!row || e->rows_pushed >= e->desc.height) return CJS_ERR_ARGUMENT;
    if (e->webp) return push_webp_row(e, row);
    if (setjmp(e->err.jump)) { /* jpeg_start_compress, jpeg_write_scanlines, jpeg_finish_compress */
        e->failed = 1;
        return e->err.pub.msg_code == JERR_OUT_OF_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
    }
    uint32_t y = e->rows_pushed % e->tile_size;
    if (y == 0)
        for (uint32_t c = 0; c < e->columns; c++) jpeg_start_compress(&e->compressors[c].cinfo, FALSE);
    write_row(e, row);
    e->rows_pushed++;
    int last = e->rows_pushed == e->desc.height;
    if (last && y + 1 < e->tile_size) {
        memcpy(e->last_row, row, (size_t)e->desc.width * 4);
        for (uint32_t pad = y + 1; pad < e->tile_size; pad++) write_row(e, e->last_row);
    }
    if (!last && y + 1 < e->tile_size) return CJS_OK;
    cjs_status status = end_tiles(e, (e->rows_pushed - 1) / e->tile_size);
    if (status != CJS_OK) e->failed = 1;
    return status;
}

cjs_status tiff_level_encoder_put_tile(cjs_tiff_level_encoder *e, uint32_t column, uint32_t row, const uint8_t *tile) {
    if (e->failed) return CJS_ERR_STATE;
    size_t stride = (size_t)e->tile_size * 4;
    cjs_status status;
    if (e->webp) {
        void *bytes = NULL;
        size_t length = 0;
        cweb_status encoded = cweb_webp_encode(tile, stride, e->tile_size, e->tile_size, e->desc.webp_quality,
                                               e->desc.webp_lossless, 4, 0, e->desc.samples == 4, NULL, 0, NULL, NULL, &bytes,
                                               &length, NULL);
        if (encoded != CWEB_OK) status = encoded == CWEB_ERR_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
        else status = cjs_tiff_writer_put_tile(e->writer, e->level, column, row, bytes, length);
        cweb_free(bytes);
    } else {
        column_compressor *c = &e->compressors[0];
        if (setjmp(e->err.jump)) { /* jpeg_start_compress, jpeg_write_scanlines, jpeg_finish_compress */
            e->failed = 1;
            return e->err.pub.msg_code == JERR_OUT_OF_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
        }
        jpeg_start_compress(&c->cinfo, FALSE);
        while (c->cinfo.next_scanline < c->cinfo.image_height) {
            JSAMPROW line = (JSAMPROW)(uintptr_t)(tile + (size_t)c->cinfo.next_scanline * stride);
            jpeg_write_scanlines(&c->cinfo, &line, 1);
        }
        jpeg_finish_compress(&c->cinfo);
        status = cjs_tiff_writer_put_tile(e->writer, e->level, column, row, c->bytes.data, c->bytes.length);
    }
    if (status != CJS_OK) e->failed = 1;
    return status == CJS_OK || status == CJS_ERR_NOMEM || status == CJS_ERR_LIBJPEG ? status
           : status == CJS_ERR_ARGUMENT                                            ? CJS_ERR_ARGUMENT
                                                                                    : CJS_ERR_IO;
}

/* ---- the pyramid's writer strategy for TIFF levels (writer.h) ----------------------------- */

struct level_writer {
    cjs_tiff_level_encoder *encoder;
    writer_shared *shared;
    cjs_tiff_writer *tiff;
};

static cjs_status strategy_create(const writer_setup *setup, level_writer **out) {
    level_writer *w = calloc(1, sizeof *w);
    if (!w) return CJS_ERR_NOMEM;
    w->shared = setup->shared;
    w->tiff = setup->config->tiff;
    cjs_status status = cjs_tiff_level_encoder_create(w->tiff, setup->index, setup->config->tiff_quality,
                                                       setup->config->tiff_tables, &w->encoder);
    if (status != CJS_OK) {
        free(w);
        return status;
    }
    *out = w;
    return CJS_OK;
}

static cjs_status strategy_push_row(level_writer *w, const uint8_t *row, uint32_t index, int last) {
    (void)index, (void)last;
    cjs_status status = cjs_tiff_level_encoder_push_row(w->encoder, row);
    if (status == CJS_OK) return CJS_OK;
    int number = status == CJS_ERR_NOMEM ? ENOMEM : cjs_tiff_writer_errno(w->tiff);
    return writer_fail(w->shared, number ? number : EIO);
}

static void strategy_destroy(level_writer *w) {
    cjs_tiff_level_encoder_destroy(w->encoder);
    free(w);
}

const writer_methods tiff_level_writer_methods = {
    .create = strategy_create, .push_row = strategy_push_row, .destroy = strategy_destroy,
};
