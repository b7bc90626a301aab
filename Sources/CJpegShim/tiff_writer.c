/*
 * tiff_writer.c: the TIFF container, through libtiff (cjs_tiff.h). libtiff writes to the file through
 * client procedures over pread/pwrite, so the descriptor stays usable by readers; its messages go to
 * the writer's own handlers (TIFFOpenOptions), never to stderr. Level 0's tiles are written as they
 * come; the lower levels', which come at the same time, are appended to a spool file and copied in
 * after level 0's directory, so the file has libvips' layout: each level's tiles, then its directory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctiff_io.h"
#include "tiff_writer.h"
#include "writer.h"

enum { WHERE_NONE = 0, WHERE_TIFF = 1, WHERE_SPOOL = 2 };

typedef struct {
    cjs_tiff_level desc;   /* jpeg_tables points at `tables` */
    uint8_t *tables;
    uint32_t columns, rows;
    uint64_t *offset;
    uint64_t *length;
    uint8_t *where;
    uint32_t *tiles_in_row;
    uint32_t rows_complete;
} writer_level;

struct cjs_tiff_writer {
    tiff_file file;        /* the TIFF's descriptor, libtiff's position and first message */
    TIFF *tif;
    int spool_fd;
    cjs_tiff_options options;
    uint8_t *icc;
    writer_level *levels;
    uint32_t count;
    uint32_t *progress;
    pthread_mutex_t lock;
    uint64_t spool_end;
    uint64_t bytes_written;
    int failed;
    int finished;
    /* Set when finish starts: it lets go of the lock while it reads the spool, and nothing else may
       write meanwhile. */
    int finishing;
};

/* Records the first failure (lock held); later calls fail with CJS_ERR_STATE. */
static cjs_status fail_locked(cjs_tiff_writer *w, int error_number, const char *what) {
    if (!w->failed) {
        w->failed = 1;
        if (error_number && !w->file.error_number) w->file.error_number = error_number;
        if (!w->file.message[0]) snprintf(w->file.message, sizeof w->file.message, "%s", what);
    }
    return CJS_ERR_IO;
}

/* ---- directories --------------------------------------------------------------------------- */

/* Sets the fields of level `index`'s directory, the one being written. 0, or -1 when libtiff refused. */
static int set_fields(cjs_tiff_writer *w, uint32_t index) {
    TIFF *tif = w->tif;
    const cjs_tiff_level *l = &w->levels[index].desc;
    int webp = l->compression == CJS_COMPRESSION_WEBP;
    int gray = !webp && l->photometric == CJS_PHOTOMETRIC_GRAY;
    int ok = TIFFSetField(tif, TIFFTAG_SUBFILETYPE, index ? FILETYPE_REDUCEDIMAGE : 0) &&
             TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, l->width) && TIFFSetField(tif, TIFFTAG_IMAGELENGTH, l->height) &&
             TIFFSetField(tif, TIFFTAG_TILEWIDTH, w->options.tile_size) &&
             TIFFSetField(tif, TIFFTAG_TILELENGTH, w->options.tile_size) && TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, 8) &&
             TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, webp ? l->samples : gray ? 1 : 3) &&
             TIFFSetField(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) &&
             TIFFSetField(tif, TIFFTAG_COMPRESSION, webp ? COMPRESSION_WEBP : COMPRESSION_JPEG) &&
             TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, webp ? PHOTOMETRIC_RGB : gray ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_YCBCR) &&
             TIFFSetField(tif, TIFFTAG_ORIENTATION, ORIENTATION_TOPLEFT) && TIFFSetField(tif, TIFFTAG_SOFTWARE, "TiledImageKit");
    if (ok && webp && l->samples == 4) {
        uint16_t alpha[1] = {EXTRASAMPLE_UNASSALPHA};
        ok = TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, 1, alpha);
    }
    if (ok && !webp) ok = TIFFSetField(tif, TIFFTAG_JPEGTABLES, (uint32_t)l->jpeg_tables_length, l->jpeg_tables);
    if (ok && !webp && !gray) {
        float reference[6] = {0, 255, 128, 255, 128, 255};
        ok = TIFFSetField(tif, TIFFTAG_YCBCRSUBSAMPLING, l->h_subsampling, l->v_subsampling) &&
             TIFFSetField(tif, TIFFTAG_REFERENCEBLACKWHITE, reference);
    }
    if (ok && w->options.resolution_unit)
        ok = TIFFSetField(tif, TIFFTAG_RESOLUTIONUNIT, (uint16_t)w->options.resolution_unit) &&
             TIFFSetField(tif, TIFFTAG_XRESOLUTION, w->options.x_resolution) &&
             TIFFSetField(tif, TIFFTAG_YRESOLUTION, w->options.y_resolution);
    if (ok && w->icc) ok = TIFFSetField(tif, TIFFTAG_ICCPROFILE, (uint32_t)w->options.icc_profile_length, w->icc);
    return ok ? 0 : -1;
}

/* ---- creation ------------------------------------------------------------------------------ */

static int valid_level(const cjs_tiff_level *l, const cjs_tiff_level *above) {
    if (l->width == 0 || l->height == 0 || l->width > (1u << 24) || l->height > (1u << 24)) return 0;
    if (above && (l->width != (above->width + 1) / 2 || l->height != (above->height + 1) / 2)) return 0;
    if (l->compression == CJS_COMPRESSION_WEBP)
        return l->photometric == CJS_PHOTOMETRIC_RGB && (l->samples == 3 || l->samples == 4) && l->webp_quality >= 1 &&
               l->webp_quality <= 100;
    if (l->compression != 0 && l->compression != CJS_COMPRESSION_JPEG) return 0;
    if (!l->jpeg_tables || l->jpeg_tables_length < 4 || l->jpeg_tables_length > (1u << 20)) return 0;
    if (l->photometric != CJS_PHOTOMETRIC_GRAY && l->photometric != CJS_PHOTOMETRIC_YCBCR) return 0;
    if (above && (l->width != (above->width + 1) / 2 || l->height != (above->height + 1) / 2)) return 0;
    return 1;
}

static cjs_status make_level(cjs_tiff_writer *w, uint32_t i, const cjs_tiff_level *source) {
    writer_level *l = &w->levels[i];
    l->desc = *source;
    l->columns = (source->width + w->options.tile_size - 1) / w->options.tile_size;
    l->rows = (source->height + w->options.tile_size - 1) / w->options.tile_size;
    size_t tiles = (size_t)l->columns * l->rows;
    l->tables = malloc(source->jpeg_tables_length ? source->jpeg_tables_length : 1);
    l->offset = calloc(tiles, sizeof *l->offset);
    l->length = calloc(tiles, sizeof *l->length);
    l->where = calloc(tiles, 1);
    l->tiles_in_row = calloc(l->rows, sizeof *l->tiles_in_row);
    if (!l->tables || !l->offset || !l->length || !l->where || !l->tiles_in_row) return CJS_ERR_NOMEM;
    if (source->jpeg_tables_length) memcpy(l->tables, source->jpeg_tables, source->jpeg_tables_length);
    l->desc.jpeg_tables = source->jpeg_tables_length ? l->tables : NULL;
    return CJS_OK;
}

static cjs_status open_tiff(cjs_tiff_writer *w) {
    w->tif = tiff_io_open(&w->file, w->options.big_tiff ? "w8" : "w", 0);
    if (!w->tif || set_fields(w, 0) != 0) return CJS_ERR_IO;
    return CJS_OK;
}

cjs_status cjs_tiff_writer_create(int32_t fd, int32_t spool_fd, const cjs_tiff_options *options,
                                  const cjs_tiff_level *levels, uint32_t count, uint32_t *progress,
                                  cjs_tiff_writer **out) {
    if (!out) return CJS_ERR_ARGUMENT;
    *out = NULL;
    if (fd < 0 || spool_fd < 0 || !options || !levels || count == 0 || count > 32) return CJS_ERR_ARGUMENT;
    if (options->tile_size < 16 || options->tile_size > 4096 || options->tile_size % 16) return CJS_ERR_ARGUMENT;
    for (uint32_t i = 0; i < count; i++)
        if (!valid_level(&levels[i], i ? &levels[i - 1] : NULL)) return CJS_ERR_ARGUMENT;
    cjs_tiff_writer *w = calloc(1, sizeof *w);
    if (!w) return CJS_ERR_NOMEM;
    w->file.fd = fd;
    w->spool_fd = spool_fd;
    w->options = *options;
    w->count = count;
    w->progress = progress;
    pthread_mutex_init(&w->lock, NULL);
    cjs_status status = (w->levels = calloc(count, sizeof *w->levels)) ? CJS_OK : CJS_ERR_NOMEM;
    for (uint32_t i = 0; i < count && status == CJS_OK; i++) status = make_level(w, i, &levels[i]);
    if (status == CJS_OK && options->icc_profile && options->icc_profile_length) {
        w->icc = malloc(options->icc_profile_length);
        if (w->icc) memcpy(w->icc, options->icc_profile, options->icc_profile_length);
        else status = CJS_ERR_NOMEM;
    }
    if (status == CJS_OK) status = open_tiff(w);
    if (status != CJS_OK) {
        cjs_tiff_writer_destroy(w);
        return status;
    }
    *out = w;
    return CJS_OK;
}

void cjs_tiff_writer_destroy(cjs_tiff_writer *w) {
    if (!w) return;
    if (w->tif) TIFFCleanup(w->tif); /* frees without writing */
    for (uint32_t i = 0; w->levels && i < w->count; i++) {
        writer_level *l = &w->levels[i];
        free(l->tables);
        free(l->offset);
        free(l->length);
        free(l->where);
        free(l->tiles_in_row);
    }
    free(w->levels);
    free(w->icc);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

/* ---- tiles --------------------------------------------------------------------------------- */

/* Notes a tile written and publishes the level's complete tile rows (lock held). */
static void tile_written(cjs_tiff_writer *w, uint32_t level, uint32_t row, size_t index, uint8_t where,
                         uint64_t offset, uint64_t length) {
    writer_level *l = &w->levels[level];
    l->offset[index] = offset;
    l->length[index] = length;
    if (l->where[index] == WHERE_NONE) l->tiles_in_row[row]++;
    l->where[index] = where;
    w->bytes_written += length;
    uint32_t complete = l->rows_complete;
    while (complete < l->rows && l->tiles_in_row[complete] == l->columns) complete++;
    if (complete != l->rows_complete) {
        l->rows_complete = complete;
        if (w->progress) writer_publish_progress(&w->progress[level], complete);
    }
}

/* Writes a tile into the TIFF's current directory (lock held). */
static cjs_status write_raw(cjs_tiff_writer *w, uint32_t level, uint32_t column, uint32_t row, const void *bytes,
                            size_t length) {
    writer_level *l = &w->levels[level];
    uint32_t index = row * l->columns + column;
    if (TIFFWriteRawTile(w->tif, index, (void *)(uintptr_t)bytes, (tmsize_t)length) != (tmsize_t)length)
        return fail_locked(w, w->file.error_number, "cannot write a tile into the TIFF");
    tile_written(w, level, row, index, WHERE_TIFF, TIFFGetStrileOffset(w->tif, index), (uint64_t)length);
    return CJS_OK;
}

/* Appends a lower level's tile to the spool (lock held). */
static cjs_status spool(cjs_tiff_writer *w, uint32_t level, uint32_t column, uint32_t row, const void *bytes,
                        size_t length) {
    const char *p = bytes;
    uint64_t position = w->spool_end;
    size_t left = length;
    while (left > 0) {
        ssize_t n = pwrite(w->spool_fd, p, left, (off_t)position);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return fail_locked(w, n < 0 ? errno : ENOSPC, "cannot write a tile into the spool file");
        p += n;
        left -= (size_t)n;
        position += (uint64_t)n;
    }
    writer_level *l = &w->levels[level];
    tile_written(w, level, row, (size_t)row * l->columns + column, WHERE_SPOOL, w->spool_end, (uint64_t)length);
    w->spool_end = position;
    return CJS_OK;
}

cjs_status cjs_tiff_writer_put_tile(cjs_tiff_writer *w, uint32_t level, uint32_t column, uint32_t row,
                                    const void *bytes, size_t length) {
    if (!bytes || length == 0 || length > (1u << 30)) return CJS_ERR_ARGUMENT;
    pthread_mutex_lock(&w->lock);
    cjs_status status;
    if (w->failed || w->finished || w->finishing) status = CJS_ERR_STATE;
    else if (level >= w->count || column >= w->levels[level].columns || row >= w->levels[level].rows)
        status = CJS_ERR_ARGUMENT;
    else if (level == 0) status = write_raw(w, level, column, row, bytes, length);
    else status = spool(w, level, column, row, bytes, length);
    pthread_mutex_unlock(&w->lock);
    return status;
}

cjs_status cjs_tiff_writer_locate(cjs_tiff_writer *w, uint32_t level, uint32_t column, uint32_t row,
                                  int32_t *in_spool, uint64_t *offset, uint64_t *length) {
    pthread_mutex_lock(&w->lock);
    cjs_status status = CJS_ERR_ARGUMENT;
    if (level < w->count && column < w->levels[level].columns && row < w->levels[level].rows) {
        const writer_level *l = &w->levels[level];
        size_t index = (size_t)row * l->columns + column;
        status = l->where[index] == WHERE_NONE ? CJS_NEED_DATA : CJS_OK;
        *in_spool = l->where[index] == WHERE_SPOOL;
        *offset = l->offset[index];
        *length = l->length[index];
    }
    pthread_mutex_unlock(&w->lock);
    return status;
}

/* Copies lower level `level`'s tiles from the spool into its directory (lock held, except while a
   tile is read from the spool: its bytes there never move, and reads of the image, which take the
   lock to locate a tile, wait for one tile's copy at most, not for the whole of the levels'). */
static cjs_status copy_level(cjs_tiff_writer *w, uint32_t level, uint8_t **buffer, size_t *capacity) {
    writer_level *l = &w->levels[level];
    if (set_fields(w, level) != 0) return fail_locked(w, 0, "libtiff refused a level's fields");
    for (uint32_t row = 0; row < l->rows; row++)
        for (uint32_t column = 0; column < l->columns; column++) {
            size_t index = (size_t)row * l->columns + column;
            size_t length = (size_t)l->length[index];
            off_t offset = (off_t)l->offset[index];
            if (length > *capacity) {
                uint8_t *grown = realloc(*buffer, length);
                if (!grown) return fail_locked(w, ENOMEM, "out of memory");
                *buffer = grown;
                *capacity = length;
            }
            pthread_mutex_unlock(&w->lock);
            ssize_t n = pread(w->spool_fd, *buffer, length, offset);
            int read_errno = errno;
            pthread_mutex_lock(&w->lock);
            if (w->failed) return CJS_ERR_STATE; /* failed from outside meanwhile (a cancelled build) */
            if (n != (ssize_t)length) return fail_locked(w, n < 0 ? read_errno : EIO, "cannot read the spool file");
            w->bytes_written -= length; /* counted again as it lands in the TIFF */
            if (write_raw(w, level, column, row, *buffer, length) != CJS_OK) return CJS_ERR_IO;
        }
    return CJS_OK;
}

cjs_status cjs_tiff_writer_finish(cjs_tiff_writer *w) {
    pthread_mutex_lock(&w->lock);
    cjs_status status = w->failed || w->finished || w->finishing ? CJS_ERR_STATE : CJS_OK;
    for (uint32_t i = 0; i < w->count && status == CJS_OK; i++)
        if (w->levels[i].rows_complete != w->levels[i].rows) status = CJS_ERR_STATE;
    if (status == CJS_OK) w->finishing = 1;
    uint8_t *buffer = NULL;
    size_t capacity = 0;
    if (status == CJS_OK && !TIFFWriteDirectory(w->tif)) status = fail_locked(w, w->file.error_number, "cannot write a directory");
    for (uint32_t i = 1; i < w->count && status == CJS_OK; i++) {
        status = copy_level(w, i, &buffer, &capacity);
        if (status == CJS_OK && !TIFFWriteDirectory(w->tif))
            status = fail_locked(w, w->file.error_number, "cannot write a directory");
    }
    free(buffer);
    if (status == CJS_OK) {
        TIFFClose(w->tif); /* flushes; our close procedure keeps the descriptor */
        w->tif = NULL;
        w->finished = 1;
    }
    pthread_mutex_unlock(&w->lock);
    return status;
}

uint64_t cjs_tiff_writer_bytes_written(cjs_tiff_writer *w) {
    pthread_mutex_lock(&w->lock);
    uint64_t bytes = w->bytes_written;
    pthread_mutex_unlock(&w->lock);
    return bytes;
}

int32_t cjs_tiff_writer_errno(cjs_tiff_writer *w) {
    pthread_mutex_lock(&w->lock);
    int32_t number = w->file.error_number;
    pthread_mutex_unlock(&w->lock);
    return number;
}

void cjs_tiff_writer_copy_message(cjs_tiff_writer *w, char *out, size_t capacity) {
    if (!out || capacity == 0) return;
    pthread_mutex_lock(&w->lock);
    snprintf(out, capacity, "%s", w->file.message);
    pthread_mutex_unlock(&w->lock);
}

const cjs_tiff_level *tiff_writer_level(const cjs_tiff_writer *w, uint32_t level) {
    return level < w->count ? &w->levels[level].desc : NULL;
}

uint32_t tiff_writer_tile_size(const cjs_tiff_writer *w) { return w->options.tile_size; }
