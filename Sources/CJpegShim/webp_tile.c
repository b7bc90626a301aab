/*
 * webp_tile.c: one WebP tile of a TIFF into RGBA (cjs_tiff.h), by libwebp's decoder straight into the
 * caller's buffer. libtiff's own WebP codec would decode it too, but only through a TIFF handle (one
 * per directory, calls serialized); a tile's bytes are all this needs.
 */
#include <stdio.h>
#include <webp/decode.h>

#include "cjpeg_shim.h"

cjs_status cjs_webp_tile_decode(const void *tile, size_t tile_length, uint32_t width, uint32_t height, void *rgba,
                                size_t stride, char *message, size_t capacity) {
    if (!tile || !rgba || stride < (size_t)width * 4) return CJS_ERR_ARGUMENT;
    int w = 0, h = 0;
    if (!WebPGetInfo(tile, tile_length, &w, &h)) {
        if (message && capacity) snprintf(message, capacity, "not a WebP bitstream");
        return CJS_ERR_LIBJPEG;
    }
    if ((uint32_t)w != width || (uint32_t)h != height) {
        if (message && capacity) snprintf(message, capacity, "a WebP of %dx%d where the tile is %ux%u", w, h, width, height);
        return CJS_ERR_LIBJPEG;
    }
    if (!WebPDecodeRGBAInto(tile, tile_length, rgba, stride * (height - 1) + (size_t)width * 4, (int)stride)) {
        if (message && capacity) snprintf(message, capacity, "libwebp cannot decode the tile");
        return CJS_ERR_LIBJPEG;
    }
    return CJS_OK;
}
