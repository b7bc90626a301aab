/* rows.c: the hot row loops (scatter into tiles, 2x2 shrink). */
#include <string.h>

#include "rows.h"

void cjs_shrink_rows(const uint8_t *above, const uint8_t *below, uint32_t width, uint8_t *out) {
    uint32_t pairs = width / 2;
    for (uint32_t x = 0; x < pairs; x++) {
        const uint8_t *a = above + (size_t)x * 8, *b = below + (size_t)x * 8;
        uint8_t *o = out + (size_t)x * 4;
        for (int c = 0; c < 4; c++)
            o[c] = (uint8_t)((a[c] + a[c + 4] + b[c] + b[c + 4] + 2) >> 2);
    }
    if (width & 1) { /* an odd last column is averaged with itself */
        const uint8_t *a = above + (size_t)(width - 1) * 4, *b = below + (size_t)(width - 1) * 4;
        uint8_t *o = out + (size_t)pairs * 4;
        for (int c = 0; c < 4; c++) o[c] = (uint8_t)((2 * a[c] + 2 * b[c] + 2) >> 2);
    }
}

void cjs_scatter_row(const uint8_t *row, uint32_t width, uint32_t x_offset, uint32_t tile_size,
                     uint8_t *tile_row_base, uint32_t y_in_tile) {
    const size_t tile_bytes = (size_t)tile_size * tile_size * 4;
    uint32_t x = 0;
    uint32_t padded_x = x_offset;
    while (x < width) {
        uint32_t column = padded_x / tile_size;
        uint32_t x_in_tile = padded_x % tile_size;
        uint32_t span = tile_size - x_in_tile;
        if (span > width - x) span = width - x;
        uint8_t *dst = tile_row_base + column * tile_bytes + ((size_t)y_in_tile * tile_size + x_in_tile) * 4;
        memcpy(dst, row + (size_t)x * 4, (size_t)span * 4);
        x += span;
        padded_x += span;
    }
}
