/* png_interlace.c: Adam7-interlaced PNGs, combined pass by pass into a spool file on disk (every pass
 * of libpng's push reader gives its rows, the last completes every row), whose rows are then given in
 * order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cspool.h"
#include "png_internal.h"

static cmaster_status make_spool(cpng_decoder *d);
/* A failure of the spool file (not of the PNG): CMASTER_ERR_IO with its errno. */
static void spool_failed(cpng_decoder *d, const char *what) {
    if (!d->error_number) d->error_number = errno ? errno : EIO;
    char text[sizeof d->message];
    snprintf(text, sizeof text, "%s: %s", what, strerror(d->error_number));
    png_error(d->png, text);
}

void cpng_combine_row(cpng_decoder *d, png_bytep row, png_uint_32 number) {
    size_t bytes = (size_t)d->header.width * 4;
    if (d->spool_fd < 0 && make_spool(d) != CMASTER_OK) spool_failed(d, "cannot make the interlaced PNG's spool file");
    off_t at = (off_t)number * (off_t)bytes;
    if (number >= d->header.height) png_error(d->png, "a row past the image's height");
    errno = 0;
    if (pread(d->spool_fd, d->spool_row, bytes, at) != (ssize_t)bytes) spool_failed(d, "cannot read a row back from the spool file");
    png_progressive_combine_row(d->png, d->spool_row, row);
    errno = 0;
    if (pwrite(d->spool_fd, d->spool_row, bytes, at) != (ssize_t)bytes) spool_failed(d, "cannot write a row to the spool file");
}

/* The interlaced image's spool file: anonymous, the image's size, made when the first pass's first row
   arrives. libpng's push reader gives each row of the first passes for the rows below it too (its
   blocky preview), so the whole file is written early on: the image's size on disk. */
static cmaster_status make_spool(cpng_decoder *d) {
    uint64_t bytes = (uint64_t)d->header.width * 4 * d->header.height;
    d->spool_row = malloc((size_t)d->header.width * 4);
    if (!d->spool_row) {
        errno = ENOMEM;
        return CMASTER_ERR_NOMEM;
    }
    int fd = cspool_create(d->spool_directory);
    if (fd < 0 || bytes > (uint64_t)INT64_MAX || ftruncate(fd, (off_t)bytes) != 0) {
        int number = fd < 0 || errno ? errno : EFBIG;
        if (fd >= 0) close(fd);
        errno = number;
        return CMASTER_ERR_IO;
    }
    d->spool_fd = fd;
    return CMASTER_OK;
}

/* Reads every pass into the spool, then gives its rows in order. */
cmaster_status cpng_read_interlaced(cpng_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows) {
    if (!d->done) {
        d->destination = rgba ? rgba : (void *)d; /* non-NULL: rows are wanted (none comes before the end) */
        cmaster_status status = cpng_run(d);
        d->destination = NULL;
        if (status != CMASTER_OK) return status;
        if (!d->done) return cpng_starved(d, "the PNG ends before its image does");
    }
    /* libpng's push reader reaches IEND without an error when the image data ends early: every pass
       must have come to the last row. */
    if (d->spool_fd < 0 || d->last_pass != 6 || d->last_row + 1 != d->header.height) {
        snprintf(d->message, sizeof d->message, "the image data ends in pass %d of 7, row %u", d->last_pass + 1, d->last_row);
        d->has_error = 1;
        return d->failure = CMASTER_ERR_CORRUPT;
    }
    size_t bytes = (size_t)d->header.width * 4;
    while (*rows < max_rows && d->rows_read < d->header.height) {
        if (pread(d->spool_fd, (uint8_t *)rgba + (size_t)*rows * stride, bytes, (off_t)d->rows_read * (off_t)bytes) != (ssize_t)bytes) {
            snprintf(d->message, sizeof d->message, "cannot read row %u back from the spool file", d->rows_read);
            d->has_error = 1;
            return d->failure = CMASTER_ERR_CORRUPT;
        }
        d->rows_read++;
        (*rows)++;
    }
    return d->rows_read == d->header.height ? CMASTER_DONE : CMASTER_OK;
}

