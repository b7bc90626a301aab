/* rows.h: the hot row loops: scatter into tiles (the writers), 2x2 shrink (the pyramid). */
#ifndef CJS_ROWS_H
#define CJS_ROWS_H
#include <stdint.h>
#include "cjpeg_shim.h"

/** Copies one RGBA row into its tiles: `base` is the first tile's block (the row's tile row, or a
 * band of it), `tile_stride` the bytes from one tile's block to the next, `y` the row in the block. */
void cjs_scatter_row(const uint8_t *row, uint32_t width, uint32_t x_offset, uint32_t tile_size, size_t tile_stride,
                     uint8_t *base, uint32_t y);
/** The 2x2 box shrink of one pair of RGBA rows (`below` may equal `above`): each channel is
 * (a + b + c + d + 2) >> 2; an odd last column is averaged with itself. */
void cjs_shrink_rows(const uint8_t *above, const uint8_t *below, uint32_t width, uint8_t *out);
#endif
