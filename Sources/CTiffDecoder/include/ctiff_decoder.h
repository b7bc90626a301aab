/* ctiff_decoder.h: a decoder of TIFF masters over libtiff, giving RGBA rows of 8-bit samples: the only
 * header Swift sees of the TIFF master side (libtiff's tiffio.h stays in the .c file).
 *
 * A TIFF's directory may sit anywhere in the file (libtiff writes it last), so the decoder reads it
 * from a file: the master's own file when its path is known, otherwise an anonymous spool file that
 * the bytes fed are written to (disk, not memory), read once the input has ended. */
#ifndef CTIFF_DECODER_H
#define CTIFF_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include <cmaster_status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every call that can fail returns a cmaster_status (cmaster_status.h, shared by the master decoders). */

/** What the chosen page's directory says. */
typedef struct {
    uint32_t width;
    uint32_t height;
    int32_t bits_per_sample;    /* as stored: 1, 2, 4, 8 or 16 */
    int32_t samples_per_pixel;  /* as stored, extra samples included */
    int32_t photometric;        /* TIFF's PhotometricInterpretation */
    int32_t compression;        /* TIFF's Compression */
    int32_t planar;             /* 1 contiguous (chunky), 2 separate planes */
    int32_t tiled;              /* 1: tiles of tile_width x tile_height; 0: strips of rows_per_strip rows */
    uint32_t tile_width, tile_height, rows_per_strip;
    int32_t has_alpha;          /* an associated or unassociated alpha extra sample */
    int32_t alpha_associated;   /* 1: premultiplied (undone in the rows given) */
    int32_t is_gray;            /* gray or gray+alpha (bilevel included) */
    int32_t is_cmyk;
    int32_t orientation;        /* the Orientation tag, 0 when absent */
    int32_t big_tiff;
    int32_t big_endian;
    uint32_t page_count;        /* pages: directories of the main chain that are not reduced-resolution
                                   copies or masks (NewSubfileType), the first always; SubIFDs not counted */
    int32_t resolution_unit;    /* 1 none, 2 inch, 3 centimetre; 0 when there is no resolution */
    double x_resolution, y_resolution;
} ctiff_header;

typedef struct ctiff_decoder ctiff_decoder;

/** A page's stored size and Orientation tag (0 when absent), as its directory says. */
typedef struct {
    uint32_t width, height;
    int32_t orientation;
} ctiff_page_size;

/**
 * A decoder of page `page` (0: the first) of a TIFF. `path` non-NULL: that file is read (the bytes fed
 * are only counted). Else the bytes fed are spooled to an anonymous file made in `spool_directory`.
 * CMASTER_ERR_IO (errno in *error_number) when the file cannot be opened or made; CMASTER_ERR_NOMEM.
 */
cmaster_status ctiff_decoder_create(const char *path, const char *spool_directory, uint32_t page,
                                  ctiff_decoder **out, int *error_number);
void ctiff_decoder_destroy(ctiff_decoder *d);

/** The next bytes of the file: written to the spool (or, reading the file itself, counted). */
cmaster_status ctiff_decoder_feed(ctiff_decoder *d, const void *bytes, size_t length);
/** No more bytes will come: the spool is complete and can be read. */
cmaster_status ctiff_decoder_end_input(ctiff_decoder *d);

/** Reads the directory: CMASTER_OK with *header filled, or CMASTER_NEED_DATA while a spool is incomplete. */
cmaster_status ctiff_decoder_read_header(ctiff_decoder *d, ctiff_header *header);

/**
 * Decodes up to `max_rows` rows into `rgba` (rows `stride` bytes apart, 4 bytes a pixel): gray
 * repeated into R, G and B (MinIsWhite inverted), palettes looked up, CMYK as R = (255-C)(255-K)/255
 * rounded (likewise G, B), 16-bit samples to 8 as round(v * 255 / 65535), associated alpha undone
 * (c * 255 / a rounded, 0 where a is 0), alpha 255 where there is none; extra samples other than the
 * first alpha are skipped (never unpacked, their planes never read). *rows: how many were written.
 * CMASTER_OK (more to come), CMASTER_DONE (the last row given), CMASTER_NEED_DATA (reading the master's own
 * file while its bytes are still fed: rows keep pace with the bytes, their share of the file), or an
 * error.
 */
cmaster_status ctiff_decoder_read_rows(ctiff_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows);

/** *finished: 1 once every row has been given and the input has ended. Returns the failure, if any. */
cmaster_status ctiff_decoder_state(const ctiff_decoder *d, int32_t *finished);
/** Rows given so far. */
uint32_t ctiff_decoder_rows_read(const ctiff_decoder *d);
/** The errno of the last CMASTER_ERR_IO. */
int ctiff_decoder_error_number(const ctiff_decoder *d);
/** The first error's message ("" when none). */
void ctiff_decoder_copy_message(const ctiff_decoder *d, char *out, size_t capacity);
/** The ICC profile (InterColorProfile) once the header has been read: *length 0 when absent. Owned by the decoder. */
void ctiff_decoder_icc_profile(const ctiff_decoder *d, const void **bytes, size_t *length);
/** Every page's size, in order, read as the pages were counted (one walk of the directories) once the
    header has been read: at most `capacity` copied to `out`; returns the number of pages recorded. */
uint32_t ctiff_decoder_page_sizes(const ctiff_decoder *d, ctiff_page_size *out, uint32_t capacity);
/** A descriptive text tag of the page's directory once its header has been read: ImageDescription (270),
    DateTime (306), Artist (315) or Copyright (33432); NULL when absent or another tag. Owned by libtiff,
    valid until the decoder is destroyed. */
const char *ctiff_decoder_text_tag(const ctiff_decoder *d, uint32_t tag);

#ifdef __cplusplus
}
#endif

#endif
