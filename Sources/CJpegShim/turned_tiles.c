/*
 * turned_tiles.c: the pyramid's writer strategy for the levels of a turned image's TIFF (writer.h).
 * A level's rows come as stored; an upright tile is a tile-sized square of them, anchored at the
 * stored image's far edge along a flipped axis, so the rows fall into bands of a tile's height
 * (anchored at the bottom when rows are flipped). A band is held until its last row comes; then the
 * upright tiles it holds (a tile row, or a tile column when transposed) are gathered, turned and
 * padded by repeating the last column and row, as the level's rows would be, and encoded one by one
 * (tiff_level_encoder_put_tile). Memory: one band of the level's rows and one tile.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tiff_writer.h"
#include "transcode_plan.h"
#include "writer.h"

struct level_writer {
    cjs_tiff_level_encoder *encoder;
    writer_shared *shared;
    cjs_tiff_writer *tiff;
    plan_turn turn;
    uint32_t width, height;                   /* stored */
    uint32_t upright_width, upright_height, tile, columns, rows;
    uint32_t band_start;                      /* the stored row the band's first line holds */
    uint32_t *band;                           /* tile rows of `width` pixels */
    uint32_t *pixels;                         /* one upright tile */
};

static cjs_status create(const writer_setup *setup, level_writer **out) {
    level_writer *w = calloc(1, sizeof *w);
    if (!w) return CJS_ERR_NOMEM;
    w->shared = setup->shared;
    w->tiff = setup->config->tiff;
    w->turn = plan_turn_of(setup->config->tiff_orientation);
    w->width = setup->level.width;
    w->height = setup->level.height;
    w->tile = setup->tile_size;
    w->upright_width = w->turn.transpose ? w->height : w->width;
    w->upright_height = w->turn.transpose ? w->width : w->height;
    w->columns = (w->upright_width + w->tile - 1) / w->tile;
    w->rows = (w->upright_height + w->tile - 1) / w->tile;
    const cjs_tiff_level *desc = tiff_writer_level(w->tiff, setup->index);
    cjs_status status = !desc || desc->width != w->upright_width || desc->height != w->upright_height
                            ? CJS_ERR_ARGUMENT
                            : cjs_tiff_level_encoder_create(w->tiff, setup->index, setup->config->tiff_quality,
                                                            setup->config->tiff_tables, &w->encoder);
    if (status == CJS_OK) {
        w->band = malloc((size_t)w->tile * w->width * 4);
        w->pixels = malloc((size_t)w->tile * w->tile * 4);
        if (!w->band || !w->pixels) status = CJS_ERR_NOMEM;
    }
    if (status != CJS_OK) {
        cjs_tiff_level_encoder_destroy(w->encoder);
        free(w->band);
        free(w->pixels);
        free(w);
        return status;
    }
    *out = w;
    return CJS_OK;
}

/* Gathers upright tile (column, row) from the band, turned and padded: each upright pixel (X, Y),
   clamped into the image, is stored pixel (x, y) with (a, b) = transposed ? (Y, X) : (X, Y) and
   x = a, or width - 1 - a when x is flipped (y likewise). Along an upright row the stored pixel moves
   by one pixel or one row, forwards or backwards. */
static void gather(level_writer *w, uint32_t column, uint32_t row) {
    uint32_t x_first = column * w->tile;
    uint32_t inside = w->upright_width - x_first < w->tile ? w->upright_width - x_first : w->tile;
    for (uint32_t j = 0; j < w->tile; j++) {
        uint32_t y_up = row * w->tile + j;
        if (y_up >= w->upright_height) y_up = w->upright_height - 1;
        uint32_t a = w->turn.transpose ? y_up : x_first, b = w->turn.transpose ? x_first : y_up;
        uint32_t x = w->turn.flip_x ? w->width - 1 - a : a, y = w->turn.flip_y ? w->height - 1 - b : b;
        const uint32_t *from = w->band + (size_t)(y - w->band_start) * w->width + x;
        ptrdiff_t step = w->turn.transpose ? (w->turn.flip_y ? -(ptrdiff_t)w->width : (ptrdiff_t)w->width)
                                           : (w->turn.flip_x ? -1 : 1);
        uint32_t *out = w->pixels + (size_t)j * w->tile;
        for (uint32_t i = 0; i < inside; i++) out[i] = from[(ptrdiff_t)i * step];
        for (uint32_t i = inside; i < w->tile; i++) out[i] = out[inside - 1];
    }
}

/* The band of stored row `y`: [start, end), a tile's height, anchored at the bottom when y is flipped. */
static void band_of(const level_writer *w, uint32_t y, uint32_t *start, uint32_t *end, uint32_t *index) {
    if (w->turn.flip_y) {
        *index = (w->height - 1 - y) / w->tile;
        *end = w->height - *index * w->tile;
        *start = *end > w->tile ? *end - w->tile : 0;
    } else {
        *index = y / w->tile;
        *start = *index * w->tile;
        *end = *start + w->tile < w->height ? *start + w->tile : w->height;
    }
}

static cjs_status push_row(level_writer *w, const uint8_t *row, uint32_t index, int last) {
    (void)last;
    if (index >= w->height) return writer_fail(w->shared, EINVAL);
    uint32_t start, end, band;
    band_of(w, index, &start, &end, &band);
    w->band_start = start;
    memcpy(w->band + (size_t)(index - start) * w->width, row, (size_t)w->width * 4);
    if (index + 1 != end) return CJS_OK;
    /* The band is whole: its upright tiles are a tile row, or a tile column when transposed. */
    uint32_t count = w->turn.transpose ? w->rows : w->columns;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t column = w->turn.transpose ? band : k, tile_row = w->turn.transpose ? k : band;
        gather(w, column, tile_row);
        cjs_status status = tiff_level_encoder_put_tile(w->encoder, column, tile_row, (const uint8_t *)w->pixels);
        if (status != CJS_OK) {
            int number = status == CJS_ERR_NOMEM ? ENOMEM : cjs_tiff_writer_errno(w->tiff);
            return writer_fail(w->shared, number ? number : EIO);
        }
    }
    return CJS_OK;
}

static void destroy(level_writer *w) {
    cjs_tiff_level_encoder_destroy(w->encoder);
    free(w->band);
    free(w->pixels);
    free(w);
}

const writer_methods turned_tiles_writer_methods = {.create = create, .push_row = push_row, .destroy = destroy};
