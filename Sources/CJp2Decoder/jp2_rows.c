/* jp2_rows.c: the JPEG 2000 decoder's rows (cjp2_decoder.h): a band of whole rows decoded by a codec
 * of its own (opj_set_decode_area, then opj_decode: only the code-blocks the window crosses), its
 * samples converted to 8-bit RGBA. */
#include <stdlib.h>
#include <string.h>

#include "jp2_internal.h"

/* Rows of the next band from row `top`: as many as the budget allows, never past the tile row. */
static uint32_t band_height(const cjp2_decoder *d, uint32_t top) {
    const cjp2_header *h = &d->header;
    uint64_t row_bytes = (uint64_t)h->width * (uint64_t)h->components * 4;
    uint64_t rows = d->band_budget / (row_bytes ? row_bytes : 1);
    if (rows < 1) rows = 1;
    uint64_t y = (uint64_t)d->y0 + top;
    uint64_t tile_end = d->tile_dy ? d->tile_y0 + ((y - d->tile_y0) / d->tile_dy + 1) * (uint64_t)d->tile_dy : y + rows;
    uint64_t end = y + rows < tile_end ? y + rows : tile_end;
    if (end > (uint64_t)d->y0 + h->height) end = (uint64_t)d->y0 + h->height;
    return (uint32_t)(end - y);
}

/* The most rows a band can have: the budget's, at most a tile row's and the image's. */
static uint32_t most_band_rows(const cjp2_decoder *d) {
    const cjp2_header *h = &d->header;
    uint64_t rows = d->band_budget / ((uint64_t)h->width * (uint64_t)h->components * 4);
    if (rows < 1) rows = 1;
    if (d->tile_dy && rows > d->tile_dy) rows = d->tile_dy;
    return rows < h->height ? (uint32_t)rows : h->height;
}

/* round(v * 255 / max) for v in 0...max, after a signed sample's offset. */
static inline uint8_t to8(int32_t v, int precision, int is_signed) {
    int64_t max = ((int64_t)1 << precision) - 1;
    int64_t x = (int64_t)v + (is_signed ? ((int64_t)1 << (precision - 1)) : 0);
    if (x < 0) x = 0;
    if (x > max) x = max;
    return precision == 8 ? (uint8_t)x : (uint8_t)((x * 255 + max / 2) / max);
}

static void convert(cjp2_decoder *d, const opj_image_t *image, uint32_t rows) {
    const cjp2_header *h = &d->header;
    uint32_t width = h->width;
    int n = h->components;
    for (uint32_t y = 0; y < rows; y++) {
        uint8_t *out = d->band + (size_t)y * width * 4;
        size_t at = (size_t)y * width;
        for (uint32_t x = 0; x < width; x++, at++, out += 4) {
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

/* Decodes the band that starts at row `rows_read`. */
static cjp2_status decode_band(cjp2_decoder *d) {
    const cjp2_header *h = &d->header;
    uint32_t top = d->rows_read, rows = band_height(d, top);
    if (!d->band && !(d->band = malloc((size_t)h->width * 4 * most_band_rows(d))))
        return jp2_fail(d, CJP2_ERR_NOMEM, "out of memory for a band of %u rows", rows);
    opj_codec_t *codec;
    opj_stream_t *stream;
    opj_image_t *image;
    cjp2_status status = jp2_open_codec(d, &codec, &stream, &image);
    if (status == CJP2_OK) {
        uint32_t y = d->y0 + top;
        if (!opj_set_decode_area(codec, image, (OPJ_INT32)d->x0, (OPJ_INT32)y, (OPJ_INT32)(d->x0 + h->width), (OPJ_INT32)(y + rows)))
            status = CJP2_ERR_CORRUPT;
        else if (!opj_decode(codec, stream, image))
            status = d->cursor.short_read ? CJP2_ERR_TRUNCATED : CJP2_ERR_CORRUPT;
    }
    if (status == CJP2_OK) {
        for (int c = 0; c < h->components && status == CJP2_OK; c++)
            if (!image->comps[c].data || image->comps[c].w != h->width || image->comps[c].h != rows) status = CJP2_ERR_CORRUPT;
        if (status == CJP2_OK) {
            uint64_t bytes = (uint64_t)h->width * rows * (uint64_t)h->components * 4;
            if (bytes > d->band_bytes) d->band_bytes = bytes;
            convert(d, image, rows);
            d->band_top = top;
            d->band_rows = rows;
        }
    }
    jp2_close_codec(codec, stream, image);
    switch (status) {
    case CJP2_OK: return CJP2_OK;
    case CJP2_ERR_NOMEM: return jp2_fail(d, status, "out of memory decoding rows %u to %u", top, top + rows);
    case CJP2_ERR_TRUNCATED: return jp2_fail(d, status, "the JPEG 2000 data ends before row %u", top);
    default:
        return jp2_fail(d, CJP2_ERR_CORRUPT, "rows %u to %u cannot be decoded: %s", top, top + rows,
                        d->opj_message[0] ? d->opj_message : "OpenJPEG refused them");
    }
}

cjp2_status cjp2_decoder_read_rows(cjp2_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows) {
    *rows = 0;
    if (d->failure != CJP2_OK) return d->failure;
    if (!rgba || stride < (size_t)d->header.width * 4) return CJP2_ERR_ARGUMENT;
    while (*rows < max_rows && d->rows_read < d->header.height) {
        if (d->rows_read >= d->band_top + d->band_rows) {
            cjp2_status status = decode_band(d);
            if (status != CJP2_OK) return status;
        }
        uint32_t available = d->band_top + d->band_rows - d->rows_read;
        uint32_t n = max_rows - *rows < available ? max_rows - *rows : available;
        size_t row_bytes = (size_t)d->header.width * 4;
        for (uint32_t i = 0; i < n; i++)
            memcpy((uint8_t *)rgba + (size_t)(*rows + i) * stride, d->band + (size_t)(d->rows_read - d->band_top + i) * row_bytes, row_bytes);
        *rows += n;
        d->rows_read += n;
    }
    return d->rows_read == d->header.height ? CJP2_DONE : CJP2_OK;
}
