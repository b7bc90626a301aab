/* png_decoder.c: a push decoder of PNG files (cpng_decoder.h) over libpng's progressive reader.
 *
 * Bytes are kept as they are fed and handed to png_process_data a small piece at a time, only when a
 * read asks for the header or for rows, and only until it has them. The row callback copies each row
 * into the caller's buffer; the rows the last piece inflates to past it go to an overflow buffer that
 * the next read empties first. So the rows held are bounded by what one piece can inflate to, never by
 * the image. An Adam7-interlaced image is combined pass by pass into a spool file on disk (its last
 * pass completes every row), whose rows are then given in order. (libpng's png_process_data_pause is not used: called from the row callback, inside the
 * inflation of an IDAT piece, it leaves libpng's byte counts wrong.) libpng reports
 * errors by longjmp: the one function that calls png_process_data (cpng_run) arms its setjmp, in C
 * frames only. Adam7 images: png_interlace.c. */
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "png_internal.h"

static void on_error(png_structp png, png_const_charp text) {
    cpng_decoder *d = png_get_error_ptr(png);
    if (!d->has_error) {
        snprintf(d->message, sizeof d->message, "%s", text ? text : "libpng failed");
        d->has_error = 1;
    }
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp text) {
    cpng_decoder *d = png_get_error_ptr(png);
    d->warnings++;
    if (!d->has_error) snprintf(d->message, sizeof d->message, "%s", text ? text : "libpng warning");
}

/* The metadata kept (ICC profile, density). */
static void keep_metadata(cpng_decoder *d) {
    png_charp name;
    int compression;
    png_bytep profile;
    png_uint_32 length;
    if (png_get_iCCP(d->png, d->info, &name, &compression, &profile, &length) && length > 0) {
        d->icc = malloc(length);
        if (!d->icc) png_error(d->png, "out of memory for the ICC profile");
        memcpy(d->icc, profile, length);
        d->icc_length = length;
    }
    double gamma;
    if (png_get_gAMA(d->png, d->info, &gamma)) d->header.gamma = gamma;
    int intent;
    if (png_get_sRGB(d->png, d->info, &intent)) d->header.srgb_intent = intent;
    png_uint_32 x, y;
    int unit;
    if (png_get_pHYs(d->png, d->info, &x, &y, &unit)) {
        d->density_unit = unit == PNG_RESOLUTION_METER ? 1 : 0;
        d->density_x = x;
        d->density_y = y;
    }
}

/* IHDR and the chunks before the first IDAT are read: the transforms to 8-bit RGBA are set. */
static void on_info(png_structp png, png_infop info) {
    cpng_decoder *d = png_get_progressive_ptr(png);
    png_uint_32 width, height;
    int depth, type, interlace;
    png_get_IHDR(png, info, &width, &height, &depth, &type, &interlace, NULL, NULL);
    if (interlace != PNG_INTERLACE_NONE && !d->spool_directory) {
        d->unsupported = 1;
        png_error(png, "interlaced (Adam7) PNGs are read only with a spool directory");
    }
    int transparency = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    d->header = (cpng_header){.width = width, .height = height, .bit_depth = depth, .color_type = type,
                              .interlaced = interlace != PNG_INTERLACE_NONE,
                              .has_alpha = (type & PNG_COLOR_MASK_ALPHA) != 0 || transparency,
                              .is_gray = (type & PNG_COLOR_MASK_COLOR) == 0, .srgb_intent = -1};
    keep_metadata(d);
    png_set_expand(png); /* palette to RGB, gray under 8 bits to 8, tRNS to alpha */
    if (depth == 16) png_set_scale_16(png);
    if (d->header.is_gray) png_set_gray_to_rgb(png);
    if (!d->header.has_alpha) png_set_filler(png, 0xFF, PNG_FILLER_AFTER);
    if (d->header.interlaced) png_set_interlace_handling(png); /* rows of each pass at full width */
    png_read_update_info(png, info); /* starts the rows and states the transforms in `info` */
    if (png_get_rowbytes(png, info) != (size_t)width * 4) png_error(png, "the rows are not 8-bit RGBA after the transforms");
    d->header_read = 1;
}

/* Keeps a row past the caller's buffer (rows of one piece's inflation). */
static void keep_overflow(cpng_decoder *d, png_bytep row) {
    size_t bytes = (size_t)d->header.width * 4;
    if (d->overflow_first == d->overflow_rows) d->overflow_first = d->overflow_rows = 0;
    if (d->overflow_rows == d->overflow_capacity) {
        uint32_t capacity = d->overflow_capacity ? d->overflow_capacity * 2 : 16;
        uint8_t *grown = capacity > d->overflow_capacity ? realloc(d->overflow, capacity * bytes) : NULL;
        if (!grown) png_error(d->png, "out of memory for the rows");
        d->overflow = grown;
        d->overflow_capacity = capacity;
    }
    memcpy(d->overflow + (size_t)d->overflow_rows * bytes, row, bytes);
    d->overflow_rows++;
}

static void on_row(png_structp png, png_bytep row, png_uint_32 number, int pass) {
    cpng_decoder *d = png_get_progressive_ptr(png);
    d->last_pass = pass, d->last_row = number;
    if (!row) return; /* a row this pass leaves as it was */
    if (d->header.interlaced) return cpng_combine_row(d, row, number);
    if (number != d->decoded) png_error(png, "a row came out of order");
    d->decoded++;
    if (!d->destination || d->produced >= d->wanted) return keep_overflow(d, row);
    memcpy(d->destination + (size_t)d->produced * d->stride, row, (size_t)d->header.width * 4);
    d->produced++;
    d->rows_read++;
}

/* Moves kept rows into the caller's buffer. */
static void take_overflow(cpng_decoder *d) {
    size_t bytes = (size_t)d->header.width * 4;
    while (d->produced < d->wanted && d->overflow_first < d->overflow_rows) {
        memcpy(d->destination + (size_t)d->produced * d->stride, d->overflow + (size_t)d->overflow_first * bytes, bytes);
        d->overflow_first++;
        d->produced++;
        d->rows_read++;
    }
}

static void on_end(png_structp png, png_infop info) {
    (void)info;
    cpng_decoder *d = png_get_progressive_ptr(png);
    d->done = 1;
}

/* Whether the read under way has what it asked for: the header, or the rows (once every row is given,
   the end of the file: a read goes on to IEND). */
static int satisfied(const cpng_decoder *d) {
    if (!d->destination) return d->header_read;
    if (d->header.interlaced) return 0; /* every pass is read before any row is given */
    return d->produced == d->wanted && d->rows_read < d->header.height;
}

/* Hands the bytes kept to libpng, a piece at a time, until the read has what it asked for, the image
   has ended, or more bytes are needed. */
cmaster_status cpng_run(cpng_decoder *d) {
    if (setjmp(png_jmpbuf(d->png))) { /* png_process_data */
        d->failure = d->unsupported ? CMASTER_ERR_UNSUPPORTED : d->error_number ? CMASTER_ERR_IO : CMASTER_ERR_CORRUPT;
        return d->failure;
    }
    while (!satisfied(d) && !d->done && d->start < d->end) {
        size_t piece = d->end - d->start < PIECE ? d->end - d->start : PIECE;
        d->start += piece; /* libpng takes a piece whole, keeping what it cannot use yet */
        png_process_data(d->png, d->info, d->input + d->start - piece, piece);
    }
    if (d->start == d->end) d->start = d->end = 0;
    return CMASTER_OK;
}

cmaster_status cpng_decoder_create(cpng_decoder **out) {
    if (!out) return CMASTER_ERR_ARGUMENT;
    *out = NULL;
    cpng_decoder *d = calloc(1, sizeof *d);
    if (!d) return CMASTER_ERR_NOMEM;
    d->spool_fd = -1; /* before any failure below: destroy closes it when >= 0 (not stdin's 0) */
    d->density_unit = -1;
    d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, d, on_error, on_warning);
    d->info = d->png ? png_create_info_struct(d->png) : NULL;
    if (!d->info) {
        cpng_decoder_destroy(d);
        return CMASTER_ERR_NOMEM;
    }
    png_set_progressive_read_fn(d->png, d, on_info, on_row, on_end);
    d->last_pass = -1;
    *out = d;
    return CMASTER_OK;
}

void cpng_decoder_destroy(cpng_decoder *d) {
    if (!d) return;
    if (d->png) png_destroy_read_struct(&d->png, d->info ? &d->info : NULL, NULL);
    free(d->input);
    free(d->overflow);
    free(d->icc);
    free(d->spool_directory);
    free(d->spool_row);
    if (d->spool_fd >= 0) close(d->spool_fd);
    free(d);
}

int cpng_decoder_error_number(const cpng_decoder *d) { return d ? d->error_number : 0; }

uint64_t cpng_decoder_spool_bytes(const cpng_decoder *d) {
    return d && d->spool_fd >= 0 ? (uint64_t)d->header.width * 4 * d->header.height : 0;
}

cmaster_status cpng_decoder_set_spool_directory(cpng_decoder *d, const char *directory) {
    if (!d || !directory || d->header_read) return CMASTER_ERR_ARGUMENT;
    free(d->spool_directory);
    d->spool_directory = strdup(directory);
    return d->spool_directory ? CMASTER_OK : CMASTER_ERR_NOMEM;
}

cmaster_status cpng_decoder_feed(cpng_decoder *d, const void *bytes, size_t length) {
    if (!d || (!bytes && length)) return CMASTER_ERR_ARGUMENT;
    if (d->failure != CMASTER_OK) return d->failure;
    if (d->ended) return CMASTER_ERR_STATE;
    if (length == 0) return CMASTER_OK;
    if (d->start > 0) { /* what libpng took is dropped before the buffer grows */
        memmove(d->input, d->input + d->start, d->end - d->start);
        d->end -= d->start;
        d->start = 0;
    }
    if (length > d->capacity - d->end) {
        size_t capacity = d->capacity ? d->capacity : 64 * 1024;
        while (capacity - d->end < length) {
            if (capacity > SIZE_MAX / 2) return CMASTER_ERR_NOMEM;
            capacity *= 2;
        }
        uint8_t *grown = realloc(d->input, capacity);
        if (!grown) return CMASTER_ERR_NOMEM;
        d->input = grown;
        d->capacity = capacity;
    }
    memcpy(d->input + d->end, bytes, length);
    d->end += length;
    d->fed += length;
    return CMASTER_OK;
}

cmaster_status cpng_decoder_end_input(cpng_decoder *d) {
    if (!d) return CMASTER_ERR_ARGUMENT;
    d->ended = 1;
    return d->failure;
}

cmaster_status cpng_starved(cpng_decoder *d, const char *what) {
    if (!d->ended) return CMASTER_NEED_DATA;
    snprintf(d->message, sizeof d->message, "%s", what);
    d->has_error = 1;
    d->failure = CMASTER_ERR_TRUNCATED;
    return d->failure;
}

cmaster_status cpng_decoder_read_header(cpng_decoder *d, cpng_header *header) {
    if (!d || !header) return CMASTER_ERR_ARGUMENT;
    if (d->failure != CMASTER_OK) return d->failure;
    if (!d->header_read) {
        d->destination = NULL;
        cmaster_status status = cpng_run(d);
        if (status != CMASTER_OK) return status;
        if (!d->header_read) return cpng_starved(d, d->fed == 0 ? "empty input" : "the PNG ends before its header does");
    }
    *header = d->header;
    return CMASTER_OK;
}

/* Whether every row has been given and the end read. */
static int finished(const cpng_decoder *d) {
    return d->done && d->rows_read == d->header.height && d->overflow_first == d->overflow_rows;
}

cmaster_status cpng_decoder_read_rows(cpng_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows) {
    if (!d || !rows || (!rgba && max_rows)) return CMASTER_ERR_ARGUMENT;
    *rows = 0;
    if (d->failure != CMASTER_OK) return d->failure;
    if (!d->header_read || (max_rows && stride < (size_t)d->header.width * 4)) return CMASTER_ERR_STATE;
    if (d->header.interlaced) return cpng_read_interlaced(d, rgba, stride, max_rows, rows);
    d->destination = rgba;
    d->stride = stride;
    d->wanted = max_rows;
    d->produced = 0;
    take_overflow(d);
    cmaster_status status = !satisfied(d) && !d->done ? cpng_run(d) : CMASTER_OK;
    int enough = satisfied(d);
    *rows = d->produced;
    d->destination = NULL;
    if (status != CMASTER_OK) return status;
    if (finished(d)) return CMASTER_DONE;
    if (d->done && d->overflow_first == d->overflow_rows) {
        snprintf(d->message, sizeof d->message, "the image data ends after %u of %u rows", d->rows_read, d->header.height);
        d->has_error = 1;
        return d->failure = CMASTER_ERR_CORRUPT;
    }
    if (enough || d->overflow_first < d->overflow_rows) return CMASTER_OK;
    return cpng_starved(d, "the PNG ends before its image does");
}

uint32_t cpng_decoder_rows_read(const cpng_decoder *d) { return d ? d->rows_read : 0; }
size_t cpng_decoder_bytes_buffered(const cpng_decoder *d) { return d ? d->end - d->start : 0; }
uint32_t cpng_decoder_warning_count(const cpng_decoder *d) { return d ? d->warnings : 0; }

void cpng_decoder_copy_message(const cpng_decoder *d, char *out, size_t capacity) {
    if (!out || capacity == 0) return;
    snprintf(out, capacity, "%s", d ? d->message : "");
}

void cpng_decoder_icc_profile(const cpng_decoder *d, const void **bytes, size_t *length) {
    if (bytes) *bytes = d ? d->icc : NULL;
    if (length) *length = d ? d->icc_length : 0;
}

void cpng_decoder_density(const cpng_decoder *d, int32_t *unit, uint32_t *x, uint32_t *y) {
    if (unit) *unit = d ? d->density_unit : -1;
    if (x) *x = d ? d->density_x : 0;
    if (y) *y = d ? d->density_y : 0;
}
