/* decoder_internal.h: the TIFF master decoder's state, shared by tiff_decoder.c (files, directory,
 * header) and tiff_rows.c (bands of rows and their conversion to RGBA). */
#ifndef CTIFF_DECODER_INTERNAL_H
#define CTIFF_DECODER_INTERNAL_H

#include <tiffio.h>

#include "ctiff_decoder.h"
#include "ctiff_io.h"

/* Directories of a TIFF's main chain looked at for its pages: a book of more is read to its 4,096th. */
#define CTIFF_MOST_DIRECTORIES 4096

/* How rows are read: one scanline at a time (contiguous strips), a strip of each plane at a time
   (separate planes), or a row of tiles at a time. */
typedef enum { READ_SCANLINES, READ_STRIPS, READ_TILES } read_mode;

/* How a pixel's colour is made from its samples. */
typedef enum { KIND_GRAY, KIND_RGB, KIND_PALETTE, KIND_CMYK } pixel_kind;

struct ctiff_decoder {
    tiff_file file;            /* the descriptor read (owned: closed by ctiff_decoder_destroy) */
    int spooling;              /* 1: the bytes fed are written to file.fd */
    uint64_t fed;
    uint64_t file_size;        /* the file's size when its directory was read */
    int ended;
    uint32_t page;
    ctiff_page_size *page_sizes; /* each page's size, as counted (CTIFF_MOST_DIRECTORIES at most) */
    uint32_t page_sizes_count;
    TIFF *tif;
    cmaster_status failure;      /* CMASTER_OK until an error; then every call returns it */
    char message[256];
    int header_read;
    ctiff_header header;
    const void *icc;
    uint32_t icc_length;
    /* Pixels */
    pixel_kind kind;
    int min_is_white;
    int colour_samples;        /* 1 gray or palette, 3 RGB, 4 CMYK */
    int alpha_index;           /* the alpha sample's index in a pixel, -1 when none */
    uint8_t palette[256][3];   /* the colour map at 8 bits */
    read_mode mode;
    /* Only a pixel's colour samples and alpha are read: other extra samples are skipped, so the work
       per pixel stays the same however many samples a file declares. */
    int stored_samples;        /* samples a stored pixel holds (3 for YCbCr, which libjpeg makes RGB) */
    int separate;              /* 1: each sample in a plane of its own */
    int used_count;            /* samples read from each pixel: the colour samples, then alpha */
    int used[5];               /* their indices in a stored pixel */
    int planes;                /* planes read: 1, or used_count for separate planes */
    size_t plane_row_bytes;    /* bytes of one row of one plane (as stored, bits packed) */
    /* The band of rows read and not yet given: [band_first, band_first + band_rows) of the image */
    uint8_t *band;             /* planes x band capacity rows x plane_row_bytes */
    uint32_t band_capacity, band_first, band_rows;
    uint8_t *tile;             /* one tile (READ_TILES) */
    uint8_t *samples;          /* one row's used samples at 8 bits, used_count a pixel */
    uint32_t rows_read;
};

/* Sets the failure and its message (the first one kept). Returns `status`. */
cmaster_status ctiff_fail(ctiff_decoder *d, cmaster_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks that the strip or tile `index` lies inside the file: CMASTER_ERR_TRUNCATED when it does not. */
cmaster_status ctiff_check_extent(ctiff_decoder *d, uint32_t index);

/* Chooses how rows are read and allocates the band: after the header has been read. */
cmaster_status ctiff_prepare_rows(ctiff_decoder *d);

#endif
