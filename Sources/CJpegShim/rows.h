/* rows.h: row loops shared by the pyramid writers. */
#ifndef CJS_ROWS_H
#define CJS_ROWS_H
#include <stdint.h>
#include "cjpeg_shim.h"

/** Copies one RGBA row into its tiles: `base` is the first tile's block (the row's tile row, or a
 * band of it), `tile_stride` the bytes from one tile's block to the next, `y` the row in the block. */
void cjs_scatter_row(const uint8_t *row, uint32_t width, uint32_t x_offset, uint32_t tile_size, size_t tile_stride,
                     uint8_t *base, uint32_t y);
#endif
