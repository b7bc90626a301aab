/* rows.h: row loops shared by the pyramid writers. */
#ifndef CJS_ROWS_H
#define CJS_ROWS_H
#include <stdint.h>
#include "cjpeg_shim.h"

/** Copies one RGBA row into its tiles: `tile_row_base` is the first tile of the row's tile row. */
void cjs_scatter_row(const uint8_t *row, uint32_t width, uint32_t x_offset, uint32_t tile_size,
                     uint8_t *tile_row_base, uint32_t y_in_tile);
#endif
