/* cpng_decoder.h: a push decoder of PNG files over libpng's progressive reader, giving RGBA rows of
 * 8-bit samples: the only header Swift sees of the PNG side (libpng's png.h stays in the .c file). */
#ifndef CPNG_DECODER_H
#define CPNG_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include <cmaster_status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every call that can fail returns a cmaster_status (cmaster_status.h, shared by the master decoders). */

/** What the header (IHDR, and the chunks before the first IDAT) says. */
typedef struct {
    uint32_t width;
    uint32_t height;
    int32_t bit_depth;    /* 1, 2, 4, 8 or 16, as stored */
    int32_t color_type;   /* PNG's: 0 gray, 2 RGB, 3 palette, 4 gray+alpha, 6 RGBA */
    int32_t interlaced;   /* 1: Adam7 */
    int32_t has_alpha;    /* an alpha channel or a tRNS chunk */
    int32_t is_gray;      /* gray or gray+alpha */
    double gamma;         /* gAMA: the file gamma (0.45455 for sRGB-like data); 0 when absent */
    int32_t srgb_intent;  /* sRGB: the rendering intent 0...3; -1 when absent */
} cpng_header;

typedef struct cpng_decoder cpng_decoder;

/** A decoder; free it with cpng_decoder_destroy. CMASTER_ERR_NOMEM. */
cmaster_status cpng_decoder_create(cpng_decoder **out);
void cpng_decoder_destroy(cpng_decoder *d);

/**
 * Lets the decoder read Adam7-interlaced PNGs: their passes are combined into an anonymous spool file of
 * the whole image (width x height x 4 bytes, on disk) made in `directory` at the first read of rows.
 * Without it they are refused (CMASTER_ERR_UNSUPPORTED). Before the header is read.
 */
cmaster_status cpng_decoder_set_spool_directory(cpng_decoder *d, const char *directory);

/** Keeps a copy of the next bytes of the file; nothing is decoded until a read asks. */
cmaster_status cpng_decoder_feed(cpng_decoder *d, const void *bytes, size_t length);
/** Says no more bytes will come: a read that needs more then fails with CMASTER_ERR_TRUNCATED. */
cmaster_status cpng_decoder_end_input(cpng_decoder *d);

/** Decodes until the header has been read: CMASTER_OK with *header filled, or CMASTER_NEED_DATA. */
cmaster_status cpng_decoder_read_header(cpng_decoder *d, cpng_header *header);

/**
 * Decodes up to `max_rows` rows into `rgba` (rows `stride` bytes apart, 4 bytes a pixel: gray
 * expanded to RGB, 16-bit samples scaled to 8 with rounding (libpng's png_set_scale_16), alpha 255
 * where the image has none). *rows: how many were written. CMASTER_OK (more rows to come, call again),
 * CMASTER_NEED_DATA (feed more), CMASTER_DONE (every row given and the end read), or an error.
 */
cmaster_status cpng_decoder_read_rows(cpng_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows);

/** The errno of a CMASTER_ERR_IO. */
int cpng_decoder_error_number(const cpng_decoder *d);
/** Bytes of the interlaced image's spool file on disk, while it exists (0 for other images). */
uint64_t cpng_decoder_spool_bytes(const cpng_decoder *d);
/** Rows given so far. */
uint32_t cpng_decoder_rows_read(const cpng_decoder *d);
/** Bytes kept that libpng has not taken yet. */
size_t cpng_decoder_bytes_buffered(const cpng_decoder *d);
/** Warnings libpng gave (ancillary chunks it dropped, ...). */
uint32_t cpng_decoder_warning_count(const cpng_decoder *d);
/** The first error's message, or the last warning's when there was no error ("" when neither). */
void cpng_decoder_copy_message(const cpng_decoder *d, char *out, size_t capacity);
/** The ICC profile (iCCP), once the header has been read: *length 0 when absent. Owned by the decoder. */
void cpng_decoder_icc_profile(const cpng_decoder *d, const void **bytes, size_t *length);
/** Physical pixel size (pHYs): unit 1 metre, 0 unknown (an aspect ratio), -1 absent. */
void cpng_decoder_density(const cpng_decoder *d, int32_t *unit, uint32_t *x, uint32_t *y);

#ifdef __cplusplus
}
#endif

#endif
