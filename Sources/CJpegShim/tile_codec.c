/* tile_codec.c: one tile into memory, as JPEG (a reused libjpeg compressor) or PNG (libpng). */
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "tile_codec.h"
#include "rows.h"

static int bytes_reserve(cjs_bytes *b, size_t capacity) {
    if (capacity <= b->capacity) return 1;
    size_t grown = b->capacity ? b->capacity : 16384;
    while (grown < capacity) grown *= 2;
    uint8_t *data = realloc(b->data, grown);
    if (!data) return 0;
    b->data = data;
    b->capacity = grown;
    return 1;
}

/* ---- JPEG -------------------------------------------------------------------------------- */

struct tile_jpeg {
    struct jpeg_compress_struct cinfo;
    cjs_error_mgr err;
    cjs_bytes_destination dest;
    int failed;
    uint8_t *flat;        /* rows with alpha composited onto white (16 at most), as wide as the widest tile */
    size_t flat_capacity;
};

/* The destination: the whole capacity of a cjs_bytes, doubled when libjpeg fills it. */
static void dest_init(j_compress_ptr cinfo) {
    cjs_bytes_destination *d = (cjs_bytes_destination *)cinfo->dest;
    if (!bytes_reserve(d->out, 65536)) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
    d->pub.next_output_byte = d->out->data;
    d->pub.free_in_buffer = d->out->capacity;
}

static boolean dest_empty(j_compress_ptr cinfo) {
    cjs_bytes_destination *d = (cjs_bytes_destination *)cinfo->dest;
    size_t used = d->out->capacity; /* libjpeg calls this only when the buffer is full */
    if (!bytes_reserve(d->out, used * 2)) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 1);
    d->pub.next_output_byte = d->out->data + used;
    d->pub.free_in_buffer = d->out->capacity - used;
    return TRUE;
}

static void dest_term(j_compress_ptr cinfo) {
    cjs_bytes_destination *d = (cjs_bytes_destination *)cinfo->dest;
    d->out->length = d->out->capacity - d->pub.free_in_buffer;
}

void cjs_bytes_destination_init(cjs_bytes_destination *d, cjs_bytes *out) {
    d->pub.init_destination = dest_init;
    d->pub.empty_output_buffer = dest_empty;
    d->pub.term_destination = dest_term;
    d->out = out;
}

cjs_status tile_jpeg_create(int quality, int gray, tile_jpeg **out) {
    *out = NULL;
    tile_jpeg *t = calloc(1, sizeof *t);
    if (!t) return CJS_ERR_NOMEM;
    cjs_error_init(&t->err, 0);
    t->cinfo.err = &t->err.pub;
    if (setjmp(t->err.jump)) { /* jpeg_create_compress, jpeg_set_defaults, jpeg_set_quality */
        jpeg_destroy_compress(&t->cinfo);
        free(t);
        return CJS_ERR_LIBJPEG;
    }
    jpeg_create_compress(&t->cinfo);
    t->cinfo.in_color_space = JCS_EXT_RGBX;
    t->cinfo.input_components = 4;
    jpeg_set_defaults(&t->cinfo);
    /* Gray: one component, libjpeg's own RGB-to-luma conversion (exact for pixels with R = G = B). */
    if (gray) jpeg_set_colorspace(&t->cinfo, JCS_GRAYSCALE);
    jpeg_set_quality(&t->cinfo, quality >= 1 && quality <= 100 ? quality : 80, TRUE);
    cjs_bytes_destination_init(&t->dest, NULL);
    t->cinfo.dest = &t->dest.pub;
    *out = t;
    return CJS_OK;
}

void tile_jpeg_destroy(tile_jpeg *t) {
    if (!t) return;
    free(t->flat);
    jpeg_destroy_compress(&t->cinfo);
    free(t);
}

cjs_status tile_jpeg_encode(tile_jpeg *t, const uint8_t *rows, size_t stride, uint32_t width, uint32_t height,
                            const void *icc, size_t icc_length, cjs_bytes *out) {
    if (t->failed) return CJS_ERR_STATE;
    if (width == 0 || height == 0 || width > 65500 || height > 65500) return CJS_ERR_ARGUMENT;
    if (icc_length > 255u * 65519u || (icc_length && !icc)) return CJS_ERR_ARGUMENT;
    t->dest.out = out;
    out->length = 0;
    if (setjmp(t->err.jump)) { /* jpeg_start_compress, jpeg_write_icc_profile, jpeg_write_scanlines, jpeg_finish_compress */
        jpeg_abort_compress(&t->cinfo); /* the settings stay; the next tile starts afresh */
        return t->err.pub.msg_code == JERR_OUT_OF_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
    }
    t->cinfo.image_width = width;
    t->cinfo.image_height = height;
    size_t row_bytes = (size_t)width * 4;
    if (row_bytes * 16 > t->flat_capacity) { /* before libjpeg starts: nothing to abort yet */
        uint8_t *grown = realloc(t->flat, row_bytes * 16);
        if (!grown) return CJS_ERR_NOMEM;
        t->flat = grown;
        t->flat_capacity = row_bytes * 16;
    }
    jpeg_start_compress(&t->cinfo, TRUE);
    if (icc_length) jpeg_write_icc_profile(&t->cinfo, icc, (unsigned)icc_length);
    while (t->cinfo.next_scanline < height) {
        JSAMPROW row[16];
        uint32_t n = 0;
        for (; n < 16 && t->cinfo.next_scanline + n < height; n++) {
            const uint8_t *source = rows + (size_t)(t->cinfo.next_scanline + n) * stride;
            row[n] = (JSAMPROW)cjs_rgba_over_white(source, width, t->flat + n * row_bytes); /* JPEG keeps no alpha */
        }
        jpeg_write_scanlines(&t->cinfo, row, n);
    }
    jpeg_finish_compress(&t->cinfo);
    return CJS_OK;
}

/* ---- PNG --------------------------------------------------------------------------------- */

typedef struct {
    cjs_bytes *out;
    int out_of_memory;
} png_sink;

static void png_write(png_structp png, png_bytep data, size_t length) {
    png_sink *sink = png_get_io_ptr(png);
    if (!bytes_reserve(sink->out, sink->out->length + length)) {
        sink->out_of_memory = 1;
        png_error(png, "out of memory");
    }
    memcpy(sink->out->data + sink->out->length, data, length);
    sink->out->length += length;
}

static void png_flush(png_structp png) { (void)png; }
static void png_silent_warning(png_structp png, png_const_charp message) { (void)png, (void)message; }

/* Whether some pixel of the RGBA rows is not opaque: the PNG then keeps the alpha. */
static int has_transparency(const uint8_t *rows, size_t stride, uint32_t width, uint32_t height) {
    for (uint32_t y = 0; y < height; y++)
        for (uint32_t x = 0; x < width; x++)
            if (rows[(size_t)y * stride + 4 * (size_t)x + 3] != 255) return 1;
    return 0;
}

cjs_status tile_png_encode(const uint8_t *rows, size_t stride, uint32_t width, uint32_t height, int gray,
                           const void *icc, size_t icc_length, cjs_bytes *out, int32_t (*cancelled)(void *),
                           void *context) {
    if (width == 0 || height == 0 || width > 1u << 20 || height > 1u << 20) return CJS_ERR_ARGUMENT;
    if (icc_length > UINT32_MAX / 2 || (icc_length && !icc)) return CJS_ERR_ARGUMENT;
    png_sink sink = {.out = out};
    out->length = 0;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, png_silent_warning);
    if (!png) return CJS_ERR_NOMEM;
    png_infop info = png_create_info_struct(png);
    if (!info || setjmp(png_jmpbuf(png))) { /* png_set_*, png_write_info, png_write_row, png_write_end */
        png_destroy_write_struct(&png, info ? &info : NULL);
        return sink.out_of_memory || !info ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
    }
    png_set_write_fn(png, &sink, png_write, png_flush);
    int alpha = !gray && has_transparency(rows, stride, width, height);
    int type = gray == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA : gray ? PNG_COLOR_TYPE_GRAY : alpha ? PNG_COLOR_TYPE_RGB_ALPHA : PNG_COLOR_TYPE_RGB;
    png_set_IHDR(png, info, width, height, 8, type,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    /* libpng checks the profile against the colour type; one it finds wrong is a (silenced) warning,
       and the PNG is written without it, rather than no PNG at all. */
    png_set_benign_errors(png, 1);
    if (icc_length) png_set_iCCP(png, info, "ICC profile", PNG_COMPRESSION_TYPE_BASE, icc, (png_uint_32)icc_length);
    png_write_info(png, info);
    if (!gray && !alpha) png_set_filler(png, 0, PNG_FILLER_AFTER); /* opaque: the rows' 4th byte is dropped */
    for (uint32_t y = 0; y < height; y++) {
        /* Asked outside libpng's calls (no longjmp crosses the caller's frames). */
        if (cancelled && y % 64 == 0 && cancelled(context)) {
            png_destroy_write_struct(&png, &info);
            return CJS_ERR_CANCELLED;
        }
        png_write_row(png, (png_const_bytep)(rows + (size_t)y * stride));
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    return CJS_OK;
}

cjs_status cjs_png_encode(const void *rows, size_t stride, uint32_t width, uint32_t height, int32_t gray,
                          const void *icc, size_t icc_length, void **out, size_t *length,
                          int32_t (*cancelled)(void *), void *context) {
    if (!rows || !out || !length || stride < (size_t)width * (gray == 2 ? 2 : gray ? 1 : 4)) return CJS_ERR_ARGUMENT;
    *out = NULL;
    *length = 0;
    cjs_bytes bytes = {0};
    cjs_status status = tile_png_encode(rows, stride, width, height, gray, icc, icc_length, &bytes, cancelled, context);
    if (status != CJS_OK) {
        free(bytes.data);
        return status;
    }
    *out = bytes.data;
    *length = bytes.length;
    return CJS_OK;
}

void cjs_free(void *pointer) { free(pointer); }

/* ---- The exported tile encoder: a tile_jpeg and its output ------------------------------- */

struct cjs_tile_encoder {
    tile_jpeg *jpeg;
    cjs_bytes out;
};

cjs_status cjs_tile_encoder_create(int32_t quality, int32_t gray, cjs_tile_encoder **out) {
    *out = NULL;
    if (quality < 1 || quality > 100) return CJS_ERR_ARGUMENT;
    cjs_tile_encoder *e = calloc(1, sizeof *e);
    if (!e) return CJS_ERR_NOMEM;
    cjs_status status = tile_jpeg_create(quality, gray, &e->jpeg);
    if (status != CJS_OK) {
        free(e);
        return status;
    }
    *out = e;
    return CJS_OK;
}

void cjs_tile_encoder_destroy(cjs_tile_encoder *e) {
    if (!e) return;
    tile_jpeg_destroy(e->jpeg);
    free(e->out.data);
    free(e);
}

cjs_status cjs_tile_encoder_encode(cjs_tile_encoder *e, const void *rows, size_t stride, uint32_t width, uint32_t height,
                                   const void **out, size_t *length) {
    *out = NULL;
    *length = 0;
    if (!rows || stride < (size_t)width * 4) return CJS_ERR_ARGUMENT;
    cjs_status status = tile_jpeg_encode(e->jpeg, rows, stride, width, height, NULL, 0, &e->out);
    if (status != CJS_OK) return status;
    *out = e->out.data;
    *length = e->out.length;
    return CJS_OK;
}
