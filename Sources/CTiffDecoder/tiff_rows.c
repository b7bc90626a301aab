/* tiff_rows.c: a TIFF master's rows, read a band at a time (one scanline of contiguous strips, one
 * strip of each plane, or one row of tiles: never the image) and converted to RGBA (ctiff_decoder.h
 * states the rules). */
#include <stdlib.h>
#include <string.h>

#include "decoder_internal.h"

/* The most a band (plus one tile) may take: a TIFF whose strips or tile rows are larger is refused. */
static const uint64_t max_band_bytes = (uint64_t)64 << 20;

/* Whether decoding every tile whole (each tile is, however little of it the image covers) would cost
   more than 16 times the image's own bytes plus 256 MiB: tiles far wider or taller than the image (a
   1-pixel-wide image in tiles of millions of pixels, each tile's bytes the same few compressed ones)
   would make a small file cost minutes. Tiles of an ordinary image cost about its bytes. */
static int tiles_cost_too_much(const ctiff_decoder *d, uint64_t tile_bytes) {
    const ctiff_header *h = &d->header;
    uint64_t across = ((uint64_t)h->width + h->tile_width - 1) / h->tile_width;
    uint64_t down = ((uint64_t)h->height + h->tile_height - 1) / h->tile_height;
    uint64_t tiles, decoded;
    if (__builtin_mul_overflow(across, down, &tiles) || __builtin_mul_overflow(tiles, (uint64_t)d->planes, &tiles) ||
        __builtin_mul_overflow(tiles, tile_bytes, &decoded))
        return 1;
    uint64_t image_bytes = (uint64_t)d->planes * d->plane_row_bytes * h->height; /* at most 2^32 x 64 MiB */
    return decoded / 16 > image_bytes + ((uint64_t)16 << 20);
}

cmaster_status ctiff_prepare_rows(ctiff_decoder *d) {
    const ctiff_header *h = &d->header;
    d->stored_samples = h->photometric == PHOTOMETRIC_YCBCR ? 3 : h->samples_per_pixel; /* libjpeg upsamples YCbCr */
    d->used_count = 0;
    for (int c = 0; c < d->colour_samples; c++) d->used[d->used_count++] = c;
    if (d->alpha_index >= 0) d->used[d->used_count++] = d->alpha_index;
    d->separate = h->planar == PLANARCONFIG_SEPARATE && d->stored_samples > 1;
    d->planes = d->separate ? d->used_count : 1; /* the planes of skipped samples are never read */
    uint64_t in_plane = d->separate ? 1 : (uint64_t)d->stored_samples;
    d->plane_row_bytes = (size_t)(((uint64_t)h->width * in_plane * (uint64_t)h->bits_per_sample + 7) / 8);
    uint64_t tile_bytes = 0;
    if (h->tiled) {
        d->mode = READ_TILES;
        d->band_capacity = h->tile_height;
        tile_bytes = (uint64_t)TIFFTileSize64(d->tif);
        if (tile_bytes == 0) return ctiff_fail(d, CMASTER_ERR_CORRUPT, "%s", d->file.message);
    } else if (d->separate) {
        d->mode = READ_STRIPS;
        d->band_capacity = h->rows_per_strip;
    } else {
        d->mode = READ_SCANLINES;
        d->band_capacity = 1;
        if ((uint64_t)TIFFScanlineSize64(d->tif) != d->plane_row_bytes)
            return ctiff_fail(d, CMASTER_ERR_CORRUPT, "the TIFF's scanline size is not what its directory implies");
    }
    if (d->band_capacity > h->height) d->band_capacity = h->height;
    /* Nothing is allocated for the rows before the file is seen to hold at least the first strip or tile. */
    cmaster_status first = ctiff_check_extent(d, 0);
    if (first != CMASTER_OK) return first;
    uint64_t band_bytes = (uint64_t)d->planes * d->band_capacity * d->plane_row_bytes;
    if (d->band_capacity == 0 || band_bytes + tile_bytes > max_band_bytes)
        return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED,
                          "the TIFF's %s of %llu bytes are over the %llu MiB read at once here",
                          h->tiled ? "tile rows" : "strips", (unsigned long long)(band_bytes + tile_bytes),
                          (unsigned long long)(max_band_bytes >> 20));
    if (h->tiled && tiles_cost_too_much(d, tile_bytes))
        return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "the TIFF's tiles of %u x %u pixels are too large for its %u x %u image",
                          h->tile_width, h->tile_height, h->width, h->height);
    /* Zeroed: a codec may fill less of a row than the row's size (CCITT fax fills `width` bits whatever
       the samples a pixel, in strips and tiles alike), and what it leaves must not be stale memory. */
    d->band = calloc(1, (size_t)band_bytes);
    d->tile = tile_bytes ? calloc(1, (size_t)tile_bytes) : NULL;
    d->samples = malloc((size_t)h->width * (size_t)d->used_count);
    if (!d->band || (tile_bytes && !d->tile) || !d->samples) return ctiff_fail(d, CMASTER_ERR_NOMEM, "out of memory");
    return CMASTER_OK;
}

static cmaster_status read_failed(ctiff_decoder *d, const char *what, uint32_t index) {
    return ctiff_fail(d, CMASTER_ERR_CORRUPT, "the TIFF's %s %u cannot be decoded: %s", what, index,
                      d->file.message[0] ? d->file.message : "libtiff failed");
}

/* One row of tiles (of each plane) into the band. */
static cmaster_status read_tile_row(ctiff_decoder *d, uint32_t row) {
    const ctiff_header *h = &d->header;
    size_t plane_bytes = (size_t)d->band_capacity * d->plane_row_bytes;
    uint64_t bits_per_pixel = (uint64_t)(d->separate ? 1 : d->stored_samples) * (uint64_t)h->bits_per_sample;
    size_t tile_row_bytes = (size_t)((h->tile_width * bits_per_pixel + 7) / 8);
    for (int p = 0; p < d->planes; p++) {
        for (uint32_t x = 0; x < h->width; x += h->tile_width) {
            uint32_t tile = TIFFComputeTile(d->tif, x, row, 0, (uint16_t)d->used[p]); /* used[0] is 0: contiguous */
            cmaster_status status = ctiff_check_extent(d, tile);
            if (status != CMASTER_OK) return status;
            if (TIFFReadEncodedTile(d->tif, tile, d->tile, (tmsize_t)-1) < 0) return read_failed(d, "tile", tile);
            size_t at = (size_t)((x * bits_per_pixel) / 8);
            size_t n = d->plane_row_bytes - at < tile_row_bytes ? d->plane_row_bytes - at : tile_row_bytes;
            for (uint32_t r = 0; r < d->band_rows; r++)
                memcpy(d->band + p * plane_bytes + r * d->plane_row_bytes + at, d->tile + r * tile_row_bytes, n);
        }
    }
    return CMASTER_OK;
}

/* The next band: rows from d->rows_read on. */
static cmaster_status fill_band(ctiff_decoder *d) {
    const ctiff_header *h = &d->header;
    uint32_t row = d->rows_read;
    d->band_first = row;
    d->band_rows = h->height - row < d->band_capacity ? h->height - row : d->band_capacity;
    cmaster_status status = CMASTER_OK;
    switch (d->mode) {
    case READ_SCANLINES:
        if (row % h->rows_per_strip == 0 && (status = ctiff_check_extent(d, TIFFComputeStrip(d->tif, row, 0))) != CMASTER_OK)
            return status;
        if (TIFFReadScanline(d->tif, d->band, row, 0) < 0) return read_failed(d, "row", row);
        return CMASTER_OK;
    case READ_STRIPS:
        for (int p = 0; p < d->planes; p++) {
            uint32_t strip = TIFFComputeStrip(d->tif, row, (uint16_t)d->used[p]);
            if ((status = ctiff_check_extent(d, strip)) != CMASTER_OK) return status;
            size_t bytes = (size_t)d->band_rows * d->plane_row_bytes;
            if (TIFFReadEncodedStrip(d->tif, strip, d->band + (size_t)p * d->band_capacity * d->plane_row_bytes,
                                     (tmsize_t)bytes) < (tmsize_t)bytes)
                return read_failed(d, "strip", strip);
        }
        return CMASTER_OK;
    case READ_TILES:
        return read_tile_row(d, row);
    }
    return CMASTER_ERR_STATE;
}

/* `count` samples of `bits` bits from `source`, sample i at index `first + i * stride` (in samples),
   into `target` (`step` apart), at 8 bits when `scale` (16-bit rounded, 1, 2 and 4-bit stretched to
   0...255), else as stored (palette indices). */
static void unpack(const uint8_t *source, size_t first, size_t stride, uint32_t count, int bits, int scale,
                   uint8_t *target, int step) {
    if (bits == 8) {
        for (uint32_t i = 0; i < count; i++) target[(size_t)i * step] = source[first + i * stride];
    } else if (bits == 16) {
        for (uint32_t i = 0; i < count; i++) {
            uint16_t v;
            memcpy(&v, source + 2 * (first + i * stride), 2);
            target[(size_t)i * step] = (uint8_t)(((uint32_t)v * 255 + 32767) / 65535);
        }
    } else {
        unsigned mask = (1u << bits) - 1, stretch = scale ? 255 / mask : 1;
        for (uint32_t i = 0; i < count; i++) {
            uint64_t bit = (uint64_t)(first + i * stride) * (uint64_t)bits;
            unsigned v = (source[bit >> 3] >> (8 - bits - (bit & 7))) & mask;
            target[(size_t)i * step] = (uint8_t)(v * stretch);
        }
    }
}

/* Associated (premultiplied) alpha undone: c * 255 / a rounded, at most 255; 0 where a is 0. */
static void unpremultiply(uint8_t *samples, uint32_t width, int spp, int colours, int a) {
    for (uint32_t x = 0; x < width; x++) {
        uint8_t *px = samples + (size_t)x * spp;
        unsigned alpha = px[a];
        for (int c = 0; c < colours; c++) {
            unsigned v = alpha ? (px[c] * 255u + alpha / 2) / alpha : 0;
            px[c] = (uint8_t)(v > 255 ? 255 : v);
        }
    }
}

/* Row `r` of the band as RGBA into `out`. */
static void convert_row(ctiff_decoder *d, uint32_t r, uint8_t *out) {
    const ctiff_header *h = &d->header;
    const int n = d->used_count, bits = h->bits_per_sample;
    const uint32_t width = h->width;
    uint8_t *s = d->samples;
    int scale = d->kind != KIND_PALETTE;
    if (d->separate) {
        size_t plane_bytes = (size_t)d->band_capacity * d->plane_row_bytes;
        for (int j = 0; j < n; j++)
            unpack(d->band + j * plane_bytes + (size_t)r * d->plane_row_bytes, 0, 1, width, bits, scale, s + j, n);
    } else if (n == d->stored_samples) { /* every sample used, in order: one pass */
        unpack(d->band + (size_t)r * d->plane_row_bytes, 0, 1, width * (uint32_t)n, bits, scale, s, 1);
    } else {
        for (int j = 0; j < n; j++)
            unpack(d->band + (size_t)r * d->plane_row_bytes, (size_t)d->used[j], (size_t)d->stored_samples, width, bits, scale, s + j, n);
    }
    if (!scale && n > 1 && bits < 8) { /* a palette's index stays as stored, its alpha stretches */
        unsigned stretch = 255 / ((1u << bits) - 1);
        for (uint32_t x = 0; x < width; x++)
            for (int c = 1; c < n; c++) s[(size_t)x * n + c] = (uint8_t)(s[(size_t)x * n + c] * stretch);
    }
    int a = d->alpha_index >= 0 ? d->colour_samples : -1; /* alpha's place among the used samples */
    if (a >= 0 && h->alpha_associated && d->kind != KIND_PALETTE) unpremultiply(s, width, n, d->colour_samples, a);
    for (uint32_t x = 0; x < width; x++, out += 4) {
        const uint8_t *px = s + (size_t)x * n;
        switch (d->kind) {
        case KIND_GRAY: {
            uint8_t g = d->min_is_white ? (uint8_t)(255 - px[0]) : px[0];
            out[0] = out[1] = out[2] = g;
            break;
        }
        case KIND_RGB: out[0] = px[0], out[1] = px[1], out[2] = px[2]; break;
        case KIND_PALETTE: memcpy(out, d->palette[px[0]], 3); break;
        case KIND_CMYK: {
            unsigned k = 255u - px[3];
            for (int c = 0; c < 3; c++) out[c] = (uint8_t)(((255u - px[c]) * k + 127) / 255);
            break;
        }
        }
        out[3] = a >= 0 ? px[a] : 255;
    }
}

cmaster_status ctiff_decoder_read_rows(ctiff_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows) {
    *rows = 0;
    if (d->failure != CMASTER_OK) return d->failure;
    if (!d->header_read) {
        cmaster_status status = ctiff_decoder_read_header(d, NULL);
        if (status != CMASTER_OK) return status;
    }
    if (!d->band) {
        cmaster_status status = ctiff_prepare_rows(d);
        if (status != CMASTER_OK) return status;
    }
    const uint32_t height = d->header.height;
    /* Reading the master's own file while its bytes are still being fed: rows keep pace with the bytes
       (their share of the file), so that a caller feeding slices can stop between them. */
    uint32_t allowed = height;
    if (!d->spooling && !d->ended && d->file_size > 0 && d->fed < d->file_size)
        allowed = (uint32_t)((uint64_t)height * d->fed / d->file_size);
    uint8_t *out = rgba;
    while (*rows < max_rows && d->rows_read < allowed) {
        if (d->rows_read >= d->band_first + d->band_rows) {
            cmaster_status status = fill_band(d);
            if (status != CMASTER_OK) return status;
        }
        convert_row(d, d->rows_read - d->band_first, out + (size_t)*rows * stride);
        d->rows_read++;
        (*rows)++;
    }
    if (d->rows_read == height) return CMASTER_DONE;
    return d->rows_read == allowed ? CMASTER_NEED_DATA : CMASTER_OK;
}
