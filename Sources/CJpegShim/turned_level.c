/* turned_level.c: level 0 of a turned JPEG's TIFF, turned in the DCT domain (turned_level.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "huffman.h"
#include "turned_level.h"

struct turned_coder {
    const transcode_plan *source, *turned;
    plan_turn turn;
    void (*turn_block)(const JCOEF *in, JCOEF *out); /* the turn's own, its signs constants */
    JDIMENSION band_rows;       /* stored iMCU rows in a band: one tile's */
    uint32_t mcus_across, mcus_down, columns, rows; /* the upright tiles' */
    huffman_codes dc[2], ac[2];
    huffman_order order;
    huffman_stream stream;
    /* A tile's stored blocks of each component, copied a stored row at a time (read in order, so the
       hardware prefetches them) before they are coded in upright order. */
    JBLOCK *local[PLAN_MAX_COMPONENTS];
};

/* How a block turns: coefficient (v, u) of the upright block is the stored block's (u, v) when
   transposed, negated where a flipped axis has an odd frequency (cos((2(7-x)+1)u pi/16) =
   (-1)^u cos((2x+1)u pi/16)). One function per turn, so that the compiler sees its signs. */
#define TURN_BLOCK(name, transpose, flip_x, flip_y)                                                     \
    static void name(const JCOEF *in, JCOEF *out) {                                                     \
        for (int v = 0; v < DCTSIZE; v++)                                                               \
            for (int u = 0; u < DCTSIZE; u++) {                                                         \
                int sv = (transpose) ? u : v, su = (transpose) ? v : u;                                 \
                int value = in[sv * DCTSIZE + su];                                                      \
                out[v * DCTSIZE + u] = (JCOEF)(((flip_x) && (su & 1)) != ((flip_y) && (sv & 1)) ? -value : value); \
            }                                                                                           \
    }
TURN_BLOCK(turn_2, 0, 1, 0)
TURN_BLOCK(turn_3, 0, 1, 1)
TURN_BLOCK(turn_4, 0, 0, 1)
TURN_BLOCK(turn_5, 1, 0, 0)
TURN_BLOCK(turn_6, 1, 0, 1)
TURN_BLOCK(turn_7, 1, 1, 1)
TURN_BLOCK(turn_8, 1, 1, 0)

int turned_coder_create(const transcode_plan *source, const transcode_plan *turned, turned_coder **out) {
    *out = NULL;
    /* A tile's stored rows must be whole iMCU rows (8 * the largest vertical factor each). */
    uint32_t imcu_height = 8u * (uint32_t)source->max_v * (uint32_t)source->sub_rows;
    if (turned->tile_size % imcu_height || turned->orientation < 2 || turned->orientation > 8) return EINVAL;
    turned_coder *c = calloc(1, sizeof *c);
    if (!c) return ENOMEM;
    c->source = source;
    c->turned = turned;
    c->turn = plan_turn_of(turned->orientation);
    c->band_rows = turned->tile_size / imcu_height;
    c->mcus_across = turned->tile_size / (8u * (uint32_t)turned->max_h);
    c->mcus_down = turned->tile_size / (8u * (uint32_t)turned->max_v);
    c->columns = (turned->width + turned->tile_size - 1) / turned->tile_size;
    c->rows = (turned->height + turned->tile_size - 1) / turned->tile_size;
    for (int i = 0; i < 2; i++)
        if (huffman_derive(&c->dc[i], turned->dc[i].bits, turned->dc[i].values) ||
            huffman_derive(&c->ac[i], turned->ac[i].bits, turned->ac[i].values)) {
            free(c);
            return EINVAL;
        }
    huffman_order_init(&c->order);
    static void (*const turns[9])(const JCOEF *, JCOEF *) = {
        NULL, NULL, turn_2, turn_3, turn_4, turn_5, turn_6, turn_7, turn_8};
    c->turn_block = turns[turned->orientation];
    for (int ci = 0; ci < turned->components; ci++) {
        const plan_component *u = &turned->component[ci];
        size_t blocks = (size_t)c->mcus_across * (size_t)u->h * c->mcus_down * (size_t)u->v;
        if (!(c->local[ci] = malloc(blocks * sizeof(JBLOCK)))) {
            turned_coder_destroy(c);
            return ENOMEM;
        }
    }
    *out = c;
    return 0;
}

void turned_coder_destroy(turned_coder *c) {
    if (!c) return;
    for (int ci = 0; ci < PLAN_MAX_COMPONENTS; ci++) free(c->local[ci]);
    free(c->stream.data);
    free(c);
}

JDIMENSION turned_band_rows(const turned_coder *c) { return c->band_rows; }

JDIMENSION turned_band_end(const turned_coder *c, JDIMENSION start) {
    JDIMENSION total = c->source->imcu_rows;
    if (start >= total) return total;
    /* Flipped rows: bands end where the bottom's do, so the first is the short one. */
    if (c->turn.flip_y) return start + (total - start - 1) % c->band_rows + 1;
    return start + c->band_rows < total ? start + c->band_rows : total;
}

/* Upright block (x, y) of component `ci`, clamped into the image, as stored block coordinates. */
static void stored_of(const turned_coder *c, int ci, JDIMENSION x, JDIMENSION y, JDIMENSION *sx, JDIMENSION *sy) {
    const plan_component *u = &c->turned->component[ci], *stored = &c->source->component[ci];
    if (x >= u->blocks_wide) x = u->blocks_wide - 1;
    if (y >= u->block_rows) y = u->block_rows - 1;
    JDIMENSION a = c->turn.transpose ? y : x, b = c->turn.transpose ? x : y;
    *sx = c->turn.flip_x ? stored->blocks_wide - 1 - a : a;
    *sy = c->turn.flip_y ? stored->block_rows - 1 - b : b;
}

/* Codes upright tile (column, row) and hands it to `writer`: 0 or an errno. */
static int code_tile(turned_coder *c, uint32_t column, uint32_t row, turned_row_at stored_row, void *context,
                     cjs_tiff_writer *writer) {
    const transcode_plan *p = c->turned;
    JDIMENSION left[PLAN_MAX_COMPONENTS], top[PLAN_MAX_COMPONENTS], across[PLAN_MAX_COMPONENTS];
    size_t blocks = 0;
    for (int ci = 0; ci < p->components; ci++) { /* the tile's stored blocks, row by stored row */
        const plan_component *u = &p->component[ci];
        JDIMENSION w = c->mcus_across * (JDIMENSION)u->h, h = c->mcus_down * (JDIMENSION)u->v;
        JDIMENSION x0, y0, x1, y1;
        stored_of(c, ci, column * w, row * h, &x0, &y0);
        stored_of(c, ci, column * w + w - 1, row * h + h - 1, &x1, &y1);
        left[ci] = x0 < x1 ? x0 : x1;
        top[ci] = y0 < y1 ? y0 : y1;
        across[ci] = (x0 < x1 ? x1 - x0 : x0 - x1) + 1;
        JDIMENSION down = (y0 < y1 ? y1 - y0 : y0 - y1) + 1;
        for (JDIMENSION y = 0; y < down; y++)
            memcpy(c->local[ci][y * across[ci]], stored_row(context, ci, top[ci] + y)[left[ci]], across[ci] * sizeof(JBLOCK));
        blocks += (size_t)(u->h * u->v);
    }
    huffman_stream *s = &c->stream;
    if (huffman_reserve(s, p->header_length)) return ENOMEM;
    huffman_begin(s, p->header, p->header_length);
    JBLOCK turned;
    for (uint32_t my = 0; my < c->mcus_down; my++)
        for (uint32_t mx = 0; mx < c->mcus_across; mx++) {
            if (huffman_reserve(s, blocks * HUFFMAN_BLOCK_BYTES)) return ENOMEM;
            for (int ci = 0; ci < p->components; ci++) {
                const plan_component *u = &p->component[ci];
                const huffman_codes *dc = &c->dc[u->table], *ac = &c->ac[u->table];
                for (int by = 0; by < u->v; by++)
                    for (int bx = 0; bx < u->h; bx++) {
                        JDIMENSION x = (column * c->mcus_across + mx) * (JDIMENSION)u->h + (JDIMENSION)bx;
                        JDIMENSION y = (row * c->mcus_down + my) * (JDIMENSION)u->v + (JDIMENSION)by;
                        JDIMENSION sx, sy;
                        stored_of(c, ci, x, y, &sx, &sy);
                        const JCOEF *in = c->local[ci][(sy - top[ci]) * across[ci] + (sx - left[ci])];
                        if (x >= u->blocks_wide || y >= u->block_rows) { /* padding: flat, the nearest DC */
                            huffman_flat_block(s, in[0], ci, dc, ac);
                            continue;
                        }
                        c->turn_block(in, turned);
                        huffman_block(s, turned, ci, dc, ac, &c->order);
                    }
            }
        }
    if (huffman_reserve(s, 16)) return ENOMEM;
    huffman_end(s);
    if (cjs_tiff_writer_put_tile(writer, 0, column, row, s->data, s->length) != CJS_OK) {
        int number = cjs_tiff_writer_errno(writer);
        return number ? number : EIO;
    }
    return 0;
}

int turned_coder_band(turned_coder *c, JDIMENSION start, turned_row_at stored_row, void *context, cjs_tiff_writer *writer) {
    JDIMENSION end = turned_band_end(c, start);
    /* The band's place among the upright tiles, counted from the stored edge they are anchored at. */
    uint32_t k = (uint32_t)(c->turn.flip_y ? (c->source->imcu_rows - end) / c->band_rows : start / c->band_rows);
    int error = 0;
    if (c->turn.transpose) /* stored rows are upright columns: a tile column */
        for (uint32_t row = 0; row < c->rows && !error; row++) error = code_tile(c, k, row, stored_row, context, writer);
    else
        for (uint32_t column = 0; column < c->columns && !error; column++)
            error = code_tile(c, column, k, stored_row, context, writer);
    return error;
}
