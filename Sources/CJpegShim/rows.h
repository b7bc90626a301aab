/* rows.h: the hot row loops: scatter into tiles (the writers), 2x2 shrink (the pyramid). */
#ifndef CJS_ROWS_H
#define CJS_ROWS_H
#include <stdint.h>
#include "cjpeg_shim.h"

/** Copies one RGBA row into its tiles: `base` is the first tile's block (the row's tile row, or a
 * band of it), `tile_stride` the bytes from one tile's block to the next, `y` the row in the block. */
void cjs_scatter_row(const uint8_t *row, uint32_t width, uint32_t x_offset, uint32_t tile_size, size_t tile_stride,
                     uint8_t *base, uint32_t y);
/** The 2x2 box shrink of one pair of RGBA rows (`below` may equal `above`): for opaque rows each
 * channel is (a + b + c + d + 2) >> 2; rows with transparency weight each colour by its alpha
 * (sum(c * a) / sum(a), rounded; alpha the plain average), so no colour under a transparent pixel
 * bleeds into the level below. An odd last column is averaged with itself. */
void cjs_shrink_rows(const uint8_t *above, const uint8_t *below, uint32_t width, uint8_t *out);
/** `row` (RGBA) composited onto white into `out` (c * a + 255 * (255 - a), over 255, rounded; alpha
 * 255), when some pixel of it is not opaque: returns `out` then, else `row` itself untouched. For JPEG
 * output, which keeps no alpha (the choice IIIF servers make). */
const uint8_t *cjs_rgba_over_white(const uint8_t *row, uint32_t width, uint8_t *out);
#endif
