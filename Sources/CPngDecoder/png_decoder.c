/* png_decoder.c: a push decoder of PNG files (cpng_decoder.h) over libpng's progressive reader.
 *
 * Bytes are kept as they are fed and handed to png_process_data a small piece at a time, only when a
 * read asks for the header or for rows, and only until it has them. The row callback copies each row
 * into the caller's buffer; the rows the last piece inflates to past it go to an overflow buffer that
 * the next read empties first. So the rows held are bounded by what one piece can inflate to, never by
 * the image. An Adam7-interlaced image is combined pass by pass into a spool file on disk (its last
 * pass completes every row), whose rows are then given in order. (libpng's png_process_data_pause is not used: called from the row callback, inside the
 * inflation of an IDAT piece, it leaves libpng's byte counts wrong.) libpng reports
 * errors by longjmp: the one function that calls png_process_data (run) arms its setjmp, in C frames
 * only. */
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpng_decoder.h"
#include "cspool.h"

/* Compressed bytes handed to libpng at a time: the rows one piece inflates to (at most about 1,000
   times its size) bound the overflow. */
enum { PIECE = 4096 };

struct cpng_decoder {
    png_structp png;
    png_infop info;
    uint8_t *input;          /* bytes fed, [start, end) not yet taken by libpng */
    size_t start, end, capacity;
    size_t fed;              /* bytes fed in all */
    int ended;
    cpng_status failure;     /* CPNG_OK until an error; then every call returns it */
    int unsupported;
    int header_read;
    int done;                /* libpng's end callback ran (IEND read) */
    cpng_header header;
    uint32_t decoded;        /* rows libpng has given */
    uint32_t rows_read;      /* rows given to the caller */
    uint8_t *destination;    /* the rows asked for (NULL while only the header is asked) */
    size_t stride;
    uint32_t wanted, produced;
    uint8_t *overflow;       /* rows inflated past the caller's buffer, [overflow_first, overflow_rows) */
    uint32_t overflow_first, overflow_rows, overflow_capacity;
    uint32_t warnings;
    int has_error;
    char message[256];
    uint8_t *icc;
    size_t icc_length;
    int32_t density_unit;
    uint32_t density_x, density_y;
    /* Adam7: every pass is combined into a spool file of the whole image (RGBA rows, on disk), whose
       rows are given once the last pass has been read. */
    char *spool_directory;   /* NULL: interlaced PNGs are refused */
    int spool_fd;            /* -1 until the first pass's first row */
    uint8_t *spool_row;      /* one row read back, combined with a pass's pixels, written again */
    int last_pass;           /* the pass and row of libpng's last row call (NULL rows too): the image */
    uint32_t last_row;       /* is whole when they are the last pass's last row (6, height - 1) */
    int error_number;        /* the spool's errno, for CPNG_ERR_IO */
};

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

/* A pass's row of an interlaced image: combined into the image's row in the spool file. */
static cpng_status make_spool(cpng_decoder *d);

/* A failure of the spool file (not of the PNG): CPNG_ERR_IO with its errno. */
static void spool_failed(cpng_decoder *d, const char *what) {
    if (!d->error_number) d->error_number = errno ? errno : EIO;
    char text[sizeof d->message];
    snprintf(text, sizeof text, "%s: %s", what, strerror(d->error_number));
    png_error(d->png, text);
}

static void combine_row(cpng_decoder *d, png_bytep row, png_uint_32 number) {
    size_t bytes = (size_t)d->header.width * 4;
    if (d->spool_fd < 0 && make_spool(d) != CPNG_OK) spool_failed(d, "cannot make the interlaced PNG's spool file");
    off_t at = (off_t)number * (off_t)bytes;
    if (number >= d->header.height) png_error(d->png, "a row past the image's height");
    errno = 0;
    if (pread(d->spool_fd, d->spool_row, bytes, at) != (ssize_t)bytes) spool_failed(d, "cannot read a row back from the spool file");
    png_progressive_combine_row(d->png, d->spool_row, row);
    errno = 0;
    if (pwrite(d->spool_fd, d->spool_row, bytes, at) != (ssize_t)bytes) spool_failed(d, "cannot write a row to the spool file");
}

static void on_row(png_structp png, png_bytep row, png_uint_32 number, int pass) {
    cpng_decoder *d = png_get_progressive_ptr(png);
    d->last_pass = pass, d->last_row = number;
    if (!row) return; /* a row this pass leaves as it was */
    if (d->header.interlaced) return combine_row(d, row, number);
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
static cpng_status run(cpng_decoder *d) {
    if (setjmp(png_jmpbuf(d->png))) { /* png_process_data */
        d->failure = d->unsupported ? CPNG_ERR_UNSUPPORTED : d->error_number ? CPNG_ERR_IO : CPNG_ERR_PNG;
        return d->failure;
    }
    while (!satisfied(d) && !d->done && d->start < d->end) {
        size_t piece = d->end - d->start < PIECE ? d->end - d->start : PIECE;
        d->start += piece; /* libpng takes a piece whole, keeping what it cannot use yet */
        png_process_data(d->png, d->info, d->input + d->start - piece, piece);
    }
    if (d->start == d->end) d->start = d->end = 0;
    return CPNG_OK;
}

cpng_status cpng_decoder_create(cpng_decoder **out) {
    if (!out) return CPNG_ERR_ARGUMENT;
    *out = NULL;
    cpng_decoder *d = calloc(1, sizeof *d);
    if (!d) return CPNG_ERR_NOMEM;
    d->density_unit = -1;
    d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, d, on_error, on_warning);
    d->info = d->png ? png_create_info_struct(d->png) : NULL;
    if (!d->info) {
        cpng_decoder_destroy(d);
        return CPNG_ERR_NOMEM;
    }
    png_set_progressive_read_fn(d->png, d, on_info, on_row, on_end);
    d->spool_fd = -1;
    d->last_pass = -1;
    *out = d;
    return CPNG_OK;
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

cpng_status cpng_decoder_set_spool_directory(cpng_decoder *d, const char *directory) {
    if (!d || !directory || d->header_read) return CPNG_ERR_ARGUMENT;
    free(d->spool_directory);
    d->spool_directory = strdup(directory);
    return d->spool_directory ? CPNG_OK : CPNG_ERR_NOMEM;
}

static cpng_status starved(cpng_decoder *d, const char *what);

/* The interlaced image's spool file: anonymous, the image's size, made when the first pass's first row
   arrives. libpng's push reader gives each row of the first passes for the rows below it too (its
   blocky preview), so the whole file is written early on: the image's size on disk. */
static cpng_status make_spool(cpng_decoder *d) {
    uint64_t bytes = (uint64_t)d->header.width * 4 * d->header.height;
    d->spool_row = malloc((size_t)d->header.width * 4);
    if (!d->spool_row) {
        errno = ENOMEM;
        return CPNG_ERR_NOMEM;
    }
    int fd = cspool_create(d->spool_directory);
    if (fd < 0 || bytes > (uint64_t)INT64_MAX || ftruncate(fd, (off_t)bytes) != 0) {
        int number = fd < 0 || errno ? errno : EFBIG;
        if (fd >= 0) close(fd);
        errno = number;
        return CPNG_ERR_IO;
    }
    d->spool_fd = fd;
    return CPNG_OK;
}

/* Reads every pass into the spool, then gives its rows in order. */
static cpng_status read_interlaced(cpng_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows) {
    if (!d->done) {
        d->destination = rgba ? rgba : (void *)d; /* non-NULL: rows are wanted (none comes before the end) */
        cpng_status status = run(d);
        d->destination = NULL;
        if (status != CPNG_OK) return status;
        if (!d->done) return starved(d, "the PNG ends before its image does");
    }
    /* libpng's push reader reaches IEND without an error when the image data ends early: every pass
       must have come to the last row. */
    if (d->spool_fd < 0 || d->last_pass != 6 || d->last_row + 1 != d->header.height) {
        snprintf(d->message, sizeof d->message, "the image data ends in pass %d of 7, row %u", d->last_pass + 1, d->last_row);
        d->has_error = 1;
        return d->failure = CPNG_ERR_PNG;
    }
    size_t bytes = (size_t)d->header.width * 4;
    while (*rows < max_rows && d->rows_read < d->header.height) {
        if (pread(d->spool_fd, (uint8_t *)rgba + (size_t)*rows * stride, bytes, (off_t)d->rows_read * (off_t)bytes) != (ssize_t)bytes) {
            snprintf(d->message, sizeof d->message, "cannot read row %u back from the spool file", d->rows_read);
            d->has_error = 1;
            return d->failure = CPNG_ERR_PNG;
        }
        d->rows_read++;
        (*rows)++;
    }
    return d->rows_read == d->header.height ? CPNG_DONE : CPNG_OK;
}

cpng_status cpng_decoder_feed(cpng_decoder *d, const void *bytes, size_t length) {
    if (!d || (!bytes && length)) return CPNG_ERR_ARGUMENT;
    if (d->failure != CPNG_OK) return d->failure;
    if (d->ended) return CPNG_ERR_STATE;
    if (length == 0) return CPNG_OK;
    if (d->start > 0) { /* what libpng took is dropped before the buffer grows */
        memmove(d->input, d->input + d->start, d->end - d->start);
        d->end -= d->start;
        d->start = 0;
    }
    if (length > d->capacity - d->end) {
        size_t capacity = d->capacity ? d->capacity : 64 * 1024;
        while (capacity - d->end < length) {
            if (capacity > SIZE_MAX / 2) return CPNG_ERR_NOMEM;
            capacity *= 2;
        }
        uint8_t *grown = realloc(d->input, capacity);
        if (!grown) return CPNG_ERR_NOMEM;
        d->input = grown;
        d->capacity = capacity;
    }
    memcpy(d->input + d->end, bytes, length);
    d->end += length;
    d->fed += length;
    return CPNG_OK;
}

cpng_status cpng_decoder_end_input(cpng_decoder *d) {
    if (!d) return CPNG_ERR_ARGUMENT;
    d->ended = 1;
    return d->failure;
}

/* After a read that stopped: needs more bytes, or none will come. */
static cpng_status starved(cpng_decoder *d, const char *what) {
    if (!d->ended) return CPNG_NEED_DATA;
    snprintf(d->message, sizeof d->message, "%s", what);
    d->has_error = 1;
    d->failure = CPNG_ERR_TRUNCATED;
    return d->failure;
}

cpng_status cpng_decoder_read_header(cpng_decoder *d, cpng_header *header) {
    if (!d || !header) return CPNG_ERR_ARGUMENT;
    if (d->failure != CPNG_OK) return d->failure;
    if (!d->header_read) {
        d->destination = NULL;
        cpng_status status = run(d);
        if (status != CPNG_OK) return status;
        if (!d->header_read) return starved(d, d->fed == 0 ? "empty input" : "the PNG ends before its header does");
    }
    *header = d->header;
    return CPNG_OK;
}

/* Whether every row has been given and the end read. */
static int finished(const cpng_decoder *d) {
    return d->done && d->rows_read == d->header.height && d->overflow_first == d->overflow_rows;
}

cpng_status cpng_decoder_read_rows(cpng_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows) {
    if (!d || !rows || (!rgba && max_rows)) return CPNG_ERR_ARGUMENT;
    *rows = 0;
    if (d->failure != CPNG_OK) return d->failure;
    if (!d->header_read || (max_rows && stride < (size_t)d->header.width * 4)) return CPNG_ERR_STATE;
    if (d->header.interlaced) return read_interlaced(d, rgba, stride, max_rows, rows);
    d->destination = rgba;
    d->stride = stride;
    d->wanted = max_rows;
    d->produced = 0;
    take_overflow(d);
    cpng_status status = !satisfied(d) && !d->done ? run(d) : CPNG_OK;
    int enough = satisfied(d);
    *rows = d->produced;
    d->destination = NULL;
    if (status != CPNG_OK) return status;
    if (finished(d)) return CPNG_DONE;
    if (d->done && d->overflow_first == d->overflow_rows) {
        snprintf(d->message, sizeof d->message, "the image data ends after %u of %u rows", d->rows_read, d->header.height);
        d->has_error = 1;
        return d->failure = CPNG_ERR_PNG;
    }
    if (enough || d->overflow_first < d->overflow_rows) return CPNG_OK;
    return starved(d, "the PNG ends before its image does");
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
