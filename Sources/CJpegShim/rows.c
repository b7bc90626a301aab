/* rows.c: the hot row loops (scatter into tiles, 2x2 shrink). */
#include <string.h>

#include "rows.h"

#if defined(__SSE2__)
#include <emmintrin.h>

/* Two output pixels from four input pixels of each row: widen to 16 bits, add the rows, add each
 * pixel to its right neighbour, then (sum + 2) >> 2 and narrow. Exact, same as the scalar loop. */
static uint32_t shrink_sse2(const uint8_t *above, const uint8_t *below, uint32_t pairs, uint8_t *out) {
    const __m128i zero = _mm_setzero_si128();
    const __m128i two = _mm_set1_epi16(2);
    uint32_t x = 0;
    for (; x + 2 <= pairs; x += 2) {
        __m128i a = _mm_loadu_si128((const __m128i *)(above + (size_t)x * 8));
        __m128i b = _mm_loadu_si128((const __m128i *)(below + (size_t)x * 8));
        __m128i lo = _mm_add_epi16(_mm_unpacklo_epi8(a, zero), _mm_unpacklo_epi8(b, zero)); /* pixels 0, 1 */
        __m128i hi = _mm_add_epi16(_mm_unpackhi_epi8(a, zero), _mm_unpackhi_epi8(b, zero)); /* pixels 2, 3 */
        __m128i first = _mm_add_epi16(lo, _mm_srli_si128(lo, 8));   /* lanes 0-3: pixel 0 + pixel 1 */
        __m128i second = _mm_add_epi16(hi, _mm_srli_si128(hi, 8));  /* lanes 0-3: pixel 2 + pixel 3 */
        __m128i sums = _mm_unpacklo_epi64(first, second);
        sums = _mm_srli_epi16(_mm_add_epi16(sums, two), 2);
        _mm_storel_epi64((__m128i *)(out + (size_t)x * 4), _mm_packus_epi16(sums, zero));
    }
    return x;
}
#endif

/* Whether every pixel of both rows is opaque (alpha 255): JPEG masters' rows always are. */
static int rows_opaque(const uint8_t *above, const uint8_t *below, uint32_t width) {
    unsigned all = 255;
    for (uint32_t x = 0; x < width; x++) all &= (unsigned)above[4 * (size_t)x + 3] & below[4 * (size_t)x + 3];
    return all == 255;
}

/* The 2x2 shrink of rows with transparency: each colour weighted by its alpha (the average of
   premultiplied colours, made straight again), so that colours under transparent pixels never bleed
   into the level below; alpha the plain average. Four fully transparent pixels: the plain average. */
static void shrink_weighted(const uint8_t *above, const uint8_t *below, uint32_t width, uint8_t *out) {
    for (uint32_t x = 0; x < (width + 1) / 2; x++) {
        uint32_t x1 = 2 * x + 1 < width ? 2 * x + 1 : 2 * x; /* an odd last column with itself */
        const uint8_t *p[4] = {above + 8 * (size_t)x, above + 4 * (size_t)x1, below + 8 * (size_t)x, below + 4 * (size_t)x1};
        unsigned alpha = p[0][3] + p[1][3] + p[2][3] + p[3][3];
        uint8_t *o = out + (size_t)x * 4;
        for (int c = 0; c < 3; c++) {
            unsigned sum = alpha ? p[0][c] * p[0][3] + p[1][c] * p[1][3] + p[2][c] * p[2][3] + p[3][c] * p[3][3]
                                 : p[0][c] + p[1][c] + p[2][c] + p[3][c];
            o[c] = (uint8_t)(alpha ? (sum + alpha / 2) / alpha : (sum + 2) >> 2);
        }
        o[3] = (uint8_t)((alpha + 2) >> 2);
    }
}

void cjs_shrink_rows(const uint8_t *above, const uint8_t *below, uint32_t width, uint8_t *out) {
    if (!rows_opaque(above, below, width)) return shrink_weighted(above, below, width, out);
    uint32_t pairs = width / 2;
    uint32_t x = 0;
#if defined(__SSE2__)
    x = shrink_sse2(above, below, pairs, out);
#endif
    for (; x < pairs; x++) {
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

void cjs_scatter_row(const uint8_t *row, uint32_t width, uint32_t x_offset, uint32_t tile_size, size_t tile_stride,
                     uint8_t *base, uint32_t y) {
    uint32_t x = 0;
    uint32_t padded_x = x_offset;
    while (x < width) {
        uint32_t column = padded_x / tile_size;
        uint32_t x_in_tile = padded_x % tile_size;
        uint32_t span = tile_size - x_in_tile;
        if (span > width - x) span = width - x;
        uint8_t *dst = base + column * tile_stride + ((size_t)y * tile_size + x_in_tile) * 4;
        memcpy(dst, row + (size_t)x * 4, (size_t)span * 4);
        x += span;
        padded_x += span;
    }
}

const uint8_t *cjs_rgba_over_white(const uint8_t *row, uint32_t width, uint8_t *out) {
    uint32_t x = 0;
    while (x < width && row[4 * x + 3] == 255) x++;
    if (x == width) return row;
    for (x = 0; x < width; x++) {
        const uint8_t *p = row + 4 * (size_t)x;
        unsigned a = p[3], white = 255 * (255 - a);
        for (int c = 0; c < 3; c++) out[4 * (size_t)x + c] = (uint8_t)((p[c] * a + white + 127) / 255);
        out[4 * (size_t)x + 3] = 255;
    }
    return out;
}
