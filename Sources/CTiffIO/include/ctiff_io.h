/*
 * ctiff_io.h: libtiff over a descriptor the caller keeps: client procedures over pread and pwrite at a
 * position of the handle's own (so other threads may pread the same descriptor), no mapping, and
 * handlers that keep libtiff's first error message here instead of printing it.
 */
#ifndef CJS_TIFF_IO_H
#define CJS_TIFF_IO_H

#include <stdint.h>
#include <tiffio.h>

typedef struct {
    int fd;
    uint64_t position;
    int error_number;   /* the errno of the first failed write */
    char message[256];  /* libtiff's first error */
    /* Instead of the descriptor (read-only): `read_at` reads up to `count` bytes at `offset` of a file of
       `size` bytes (a remote object's bytes known so far), returning the count read or -1. */
    tmsize_t (*read_at)(void *context, uint64_t offset, void *buffer, tmsize_t count);
    void *context;
    uint64_t size;
} tiff_file;

/* Opens `file` with TIFFClientOpenExt (`mode` as TIFFOpen's). `max_allocation`: libtiff's cap on one
   allocation (0: libtiff's default). NULL with file->message set when libtiff refuses. */
TIFF *tiff_io_open(tiff_file *file, const char *mode, tmsize_t max_allocation);

#endif
