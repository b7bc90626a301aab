/* png_internal.h: the decoder's state, shared by png_decoder.c (the push reader) and
 * png_interlace.c (Adam7 images combined in a spool file). Not part of the module's interface. */
#ifndef CPNG_INTERNAL_H
#define CPNG_INTERNAL_H

#include <png.h>
#include <stdint.h>

#include "cpng_decoder.h"

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
    cmaster_status failure;     /* CMASTER_OK until an error; then every call returns it */
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
    int error_number;        /* the spool's errno, for CMASTER_ERR_IO */
};

/* The functions below are the module's own: hidden from the library's other users. */
#define CPNG_INTERNAL __attribute__((visibility("hidden")))

/* Hands the bytes kept to libpng until the read has what it asked for (png_decoder.c). */
CPNG_INTERNAL cmaster_status cpng_run(cpng_decoder *d);
/* After a read that stopped: needs more bytes, or none will come (png_decoder.c). */
CPNG_INTERNAL cmaster_status cpng_starved(cpng_decoder *d, const char *what);
/* A pass's row of an interlaced image, combined into the image's row in the spool file; called from
   libpng's row callback, so it fails with png_error (png_interlace.c). */
CPNG_INTERNAL void cpng_combine_row(cpng_decoder *d, png_bytep row, png_uint_32 number);
/* Reads every pass into the spool, then gives its rows in order (png_interlace.c). */
CPNG_INTERNAL cmaster_status cpng_read_interlaced(cpng_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows);

#endif
