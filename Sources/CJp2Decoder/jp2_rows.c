/* jp2_rows.c: the JPEG 2000 decoder's rows (cjp2_decoder.h): a band of whole rows (whole rows of
 * tiles when they fit), decoded a window of whole tile columns at a time, each window by a codec of its
 * own (opj_set_decode_area, then opj_decode: only the code-blocks the window crosses), its samples
 * converted to 8-bit RGBA. Codecs are few: each reads the main header again, which costs in tiles. */
#include <stdlib.h>
#include <string.h>

#include "jp2_internal.h"

/* The RGBA band's cap (bytes): a band is never more rows than this many of the image's. */
#ifndef JP2_RGBA_BAND_CAP
#define JP2_RGBA_BAND_CAP ((uint64_t)64 << 20)
#endif

/* The samples (bytes) a window of a tiled image aims at: windows of a tile or a few decode faster than
   larger ones (measured: 1024x1024 tiles, 2.1 s a 48 MP image in windows of one tile, 2.7 s in
   windows of 2x2); an image one tile wide takes the whole budget, as each of its windows decodes the
   tile's coarser code-blocks again. */
#ifndef JP2_TILED_WINDOW
#define JP2_TILED_WINDOW ((uint64_t)16 << 20)
#endif

/* A tile is cut into at most this many bands, whatever the budget: each band decodes its tiles'
   structures anew (a codec of its own, the tile read whole for any area of it), so a tiny budget over
   a tall tile (2 rows a band, 16,854 rows in one tile: 8,427 decodes of it) would take seconds. */
#ifndef JP2_MOST_BANDS_A_TILE
#define JP2_MOST_BANDS_A_TILE 64
#endif

/* The width of a tile column (the image's when it is one tile wide). */
static uint64_t column_width(const cjp2_decoder *d) {
    return d->header.tiles_across > 1 && d->tile_dx < d->header.width ? d->tile_dx : d->header.width;
}

/* The end (reference grid) of the `count`-th tile boundary after `at`, on a grid of `step` from `origin`. */
static uint64_t boundary(uint64_t origin, uint64_t step, uint64_t at, uint64_t count) {
    return origin + ((at - origin) / step + count) * step;
}

/* The samples a window may hold: the budget, or less for a tiled image (JP2_TILED_WINDOW). */
static uint64_t window_budget(const cjp2_decoder *d) {
    int tiled = column_width(d) < d->header.width;
    return tiled && d->band_budget > JP2_TILED_WINDOW ? JP2_TILED_WINDOW : d->band_budget;
}

/* Rows of the band from row `top`: within the RGBA cap, and within a window's samples for a window one
   tile column wide; as many whole rows of tiles as that allows (no tile is then decoded twice), else
   part of one row of tiles, but at least a JP2_MOST_BANDS_A_TILE-th of a tile's rows. */
static uint32_t band_height(const cjp2_decoder *d, uint32_t top) {
    const cjp2_header *h = &d->header;
    uint64_t rows = JP2_RGBA_BAND_CAP / ((uint64_t)h->width * 4);
    uint64_t by_samples = window_budget(d) / (column_width(d) * (uint64_t)h->components * 4);
    if (by_samples < rows) rows = by_samples;
    uint64_t tile_rows_in_image = d->tile_dy < h->height ? d->tile_dy : h->height;
    uint64_t least = (tile_rows_in_image + JP2_MOST_BANDS_A_TILE - 1) / JP2_MOST_BANDS_A_TILE;
    if (rows < least) rows = least;
    /* HTJ2K: whole rows of tiles, each window whole tiles (JP2_HT_BAND_CAP says why). */
    if (h->is_htj2k && rows < tile_rows_in_image) rows = tile_rows_in_image;
    if (rows < 1) rows = 1;
    uint64_t y = (uint64_t)d->y0 + top, bottom = (uint64_t)d->y0 + h->height;
    uint64_t tile_rows = rows / d->tile_dy;
    uint64_t end = tile_rows > 0 ? boundary(d->tile_y0, d->tile_dy, y, tile_rows) : y + rows;
    uint64_t row_end = boundary(d->tile_y0, d->tile_dy, y, 1);
    if (tile_rows == 0 && end > row_end) end = row_end;
    if (end > bottom) end = bottom;
    return (uint32_t)(end - y);
}

/* Columns of the window from column `x` of a band of `rows` rows: as many whole tile columns as a
   window's samples allow (at least one), or the whole width when the image is one tile wide. */
static uint32_t window_width(const cjp2_decoder *d, uint32_t x, uint32_t rows) {
    const cjp2_header *h = &d->header;
    if (column_width(d) >= h->width) return h->width - x;
    uint64_t columns = window_budget(d) / ((uint64_t)rows * (uint64_t)h->components * 4) / d->tile_dx;
    uint64_t end = boundary(d->tile_x0, d->tile_dx, (uint64_t)d->x0 + x, columns > 0 ? columns : 1) - d->x0;
    return (uint32_t)((end < h->width ? end : h->width) - x);
}

/* round(v * 255 / max) for v in 0...max, after a signed sample's offset. */
static inline uint8_t to8(int32_t v, int precision, int is_signed) {
    int64_t max = ((int64_t)1 << precision) - 1;
    int64_t x = (int64_t)v + (is_signed ? ((int64_t)1 << (precision - 1)) : 0);
    if (x < 0) x = 0;
    if (x > max) x = max;
    return precision == 8 ? (uint8_t)x : (uint8_t)((x * 255 + max / 2) / max);
}

/* A window's samples (`width` x `rows`) into the band from column `x`. */
static void convert(cjp2_decoder *d, const opj_image_t *image, uint32_t x, uint32_t width, uint32_t rows) {
    const cjp2_header *h = &d->header;
    int n = h->components;
    for (uint32_t y = 0; y < rows; y++) {
        uint8_t *out = d->band + ((size_t)y * h->width + x) * 4;
        size_t at = (size_t)y * width;
        for (uint32_t i = 0; i < width; i++, at++, out += 4) {
            uint8_t s[4] = {0, 0, 0, 255};
            for (int c = 0; c < n; c++) s[c] = to8(image->comps[c].data[at], d->precision[c], d->is_signed[c]);
            if (h->is_cmyk) {
                int k = 255 - s[3];
                out[0] = (uint8_t)(((255 - s[0]) * k + 127) / 255);
                out[1] = (uint8_t)(((255 - s[1]) * k + 127) / 255);
                out[2] = (uint8_t)(((255 - s[2]) * k + 127) / 255);
                out[3] = 255;
            } else if (h->is_gray) {
                out[0] = out[1] = out[2] = s[0];
                out[3] = n == 2 ? s[1] : 255;
            } else {
                memcpy(out, s, 4);
            }
        }
    }
}

/* Decodes the window of columns [x, x + width) and rows [top, top + rows) (image coordinates) into the
   band, by a codec of its own. */
static cmaster_status decode_window(cjp2_decoder *d, uint32_t x, uint32_t width, uint32_t top, uint32_t rows) {
    const cjp2_header *h = &d->header;
    opj_codec_t *codec;
    opj_stream_t *stream;
    opj_image_t *image;
    cmaster_status status = jp2_open_codec(d, &codec, &stream, &image);
    if (status == CMASTER_OK) {
        OPJ_INT32 x0 = (OPJ_INT32)(d->x0 + x), y0 = (OPJ_INT32)(d->y0 + top);
        if (!opj_set_decode_area(codec, image, x0, y0, x0 + (OPJ_INT32)width, y0 + (OPJ_INT32)rows))
            status = CMASTER_ERR_CORRUPT;
        else
            status = jp2_guarded_call(d, jp2_guarded_decode(codec, stream, image, d->assertion, sizeof d->assertion));
    }
    /* What came out is what the header said (no palette or channel mapping changed the components). */
    if (status == CMASTER_OK && image->numcomps != (OPJ_UINT32)h->components) status = CMASTER_ERR_CORRUPT;
    for (int c = 0; status == CMASTER_OK && c < h->components; c++)
        if (!image->comps[c].data || image->comps[c].w != width || image->comps[c].h != rows ||
            (int)image->comps[c].prec != d->precision[c])
            status = CMASTER_ERR_CORRUPT;
    if (status == CMASTER_OK) {
        uint64_t bytes = (uint64_t)width * rows * (uint64_t)h->components * 4;
        if (bytes > d->band_bytes) d->band_bytes = bytes;
        convert(d, image, x, width, rows);
    }
    jp2_close_codec(codec, stream, image);
    return status;
}

/* Decodes the band that starts at row `rows_read`, a window of whole tile columns at a time (the
   whole width when the image is one tile wide). */
static cmaster_status decode_band(cjp2_decoder *d) {
    const cjp2_header *h = &d->header;
    if (d->rows_read == 0 && jp2_check_high_throughput(d) != CMASTER_OK) return d->failure;
    uint32_t top = d->rows_read, rows = band_height(d, top);
    size_t needed = (size_t)h->width * 4 * rows;
    if (needed > d->band_capacity) {
        uint8_t *grown = realloc(d->band, needed);
        if (!grown) return jp2_fail(d, CMASTER_ERR_NOMEM, "out of memory for a band of %u rows", rows);
        d->band = grown;
        d->band_capacity = needed;
    }
    cmaster_status status = CMASTER_OK;
    for (uint32_t x = 0; x < h->width && status == CMASTER_OK;) {
        uint32_t width = window_width(d, x, rows);
        status = decode_window(d, x, width, top, rows);
        x += width;
    }
    switch (status) {
    case CMASTER_OK:
        d->band_top = top;
        d->band_rows = rows;
        return CMASTER_OK;
    case CMASTER_ERR_NOMEM: return jp2_fail(d, status, "out of memory decoding rows %u to %u", top, top + rows);
    case CMASTER_ERR_TRUNCATED: return jp2_fail(d, status, "the JPEG 2000 data ends before row %u", top);
    case CMASTER_ERR_IO: return jp2_fail(d, status, "the JPEG 2000 file cannot be read (rows %u to %u)", top, top + rows);
    default:
        return jp2_fail(d, CMASTER_ERR_CORRUPT, "rows %u to %u cannot be decoded: %s", top, top + rows,
                        d->opj_message[0] ? d->opj_message : "OpenJPEG refused them");
    }
}

cmaster_status cjp2_decoder_read_rows(cjp2_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows) {
    *rows = 0;
    if (d->failure != CMASTER_OK) return d->failure;
    if (d->header_only) return CMASTER_ERR_STATE;
    if (!rgba || stride < (size_t)d->header.width * 4) return CMASTER_ERR_ARGUMENT;
    while (*rows < max_rows && d->rows_read < d->header.height) {
        if (d->rows_read >= d->band_top + d->band_rows) {
            cmaster_status status = decode_band(d);
            if (status != CMASTER_OK) return status;
        }
        uint32_t available = d->band_top + d->band_rows - d->rows_read;
        uint32_t n = max_rows - *rows < available ? max_rows - *rows : available;
        size_t row_bytes = (size_t)d->header.width * 4;
        for (uint32_t i = 0; i < n; i++)
            memcpy((uint8_t *)rgba + (size_t)(*rows + i) * stride, d->band + (size_t)(d->rows_read - d->band_top + i) * row_bytes, row_bytes);
        *rows += n;
        d->rows_read += n;
    }
    return d->rows_read == d->header.height ? CMASTER_DONE : CMASTER_OK;
}
