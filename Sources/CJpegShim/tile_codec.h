/*
 * tile_codec.h: encoders of one tile (or any small image) into memory, reused from tile to tile by
 * one thread: a JPEG compressor whose settings are made once, and PNG through libpng. Each guards
 * its library calls with its own setjmp; nothing calls back out.
 */
#ifndef CJS_TILE_CODEC_H
#define CJS_TILE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include <stdio.h>
#include <jpeglib.h>

#include "cjpeg_shim.h"

/** A growable output buffer (malloc'd). */
typedef struct {
    uint8_t *data;
    size_t length;
    size_t capacity;
} cjs_bytes;

/** A libjpeg destination into a cjs_bytes (its whole capacity, doubled when full); `out` may be set later. */
typedef struct {
    struct jpeg_destination_mgr pub;
    cjs_bytes *out;
} cjs_bytes_destination;

void cjs_bytes_destination_init(cjs_bytes_destination *d, cjs_bytes *out);

typedef struct tile_jpeg tile_jpeg;

/** A JPEG compressor for RGBX rows (4 bytes a pixel, the 4th ignored) at `quality`: YCbCr 4:2:0, or
    with `gray` a one-component JPEG of the rows' luma. */
cjs_status tile_jpeg_create(int quality, int gray, tile_jpeg **out);
void tile_jpeg_destroy(tile_jpeg *t);
/** Encodes `height` rows of `width` RGBA pixels, `stride` bytes apart, into `out` (replacing its bytes);
    rows with transparency are composited onto white (JPEG keeps no alpha). An ICC profile (`icc_length`
    bytes at `icc`, none when 0) is written as APP2 chunks. */
cjs_status tile_jpeg_encode(tile_jpeg *t, const uint8_t *rows, size_t stride, uint32_t width, uint32_t height,
                            const void *icc, size_t icc_length, cjs_bytes *out);

/** Encodes RGBA rows (an RGB PNG when every pixel is opaque, else RGBA) or, with `gray` 1, 1-byte rows (gray),
    with `gray` 2, 2-byte rows (gray and alpha) into `out`;
    an ICC profile (`icc_length` bytes at `icc`, none when 0) as an iCCP chunk. `cancelled` (may be NULL)
    is asked every 64 rows, with `context`: nonzero stops the encode (CJS_ERR_CANCELLED). */
cjs_status tile_png_encode(const uint8_t *rows, size_t stride, uint32_t width, uint32_t height, int gray,
                           const void *icc, size_t icc_length, cjs_bytes *out, int32_t (*cancelled)(void *),
                           void *context);

#endif
