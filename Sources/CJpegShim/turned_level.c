/* turned_level.c: level 0 of a turned JPEG's TIFF, turned in the DCT domain (turned_level.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "huffman.h"
#include "turned_level.h"

typedef struct {
    const transcode_plan *source, *turned;
    plan_turn turn;
    uint8_t from[DCTSIZE2];                  /* upright coefficient k is stored coefficient from[k] */
    JCOEF negate[DCTSIZE2];                  /* -1 where it changes sign, else 0 */
    int fd;
    size_t slot_bytes;
    size_t offset[PLAN_MAX_COMPONENTS];      /* a component's block rows within an iMCU row */
    JBLOCK *strip[PLAN_MAX_COMPONENTS];      /* an upright tile row's blocks, rows of the upright width */
    JDIMENSION strip_rows[PLAN_MAX_COMPONENTS];
    JBLOCK *line;                            /* blocks read from one source block row */
    huffman_codes dc[2], ac[2];
    huffman_order order;
    huffman_stream stream;
} turning;

/* `count` blocks of source block row `y` of component `ci` from block `x` on: 0 or an errno. */
static int read_blocks(const turning *tr, int ci, JDIMENSION y, JDIMENSION x, JDIMENSION count, JBLOCK *out) {
    const plan_component *c = &tr->source->component[ci];
    JDIMENSION per_slot = (JDIMENSION)c->source_v;
    size_t at = (size_t)(y / per_slot) * tr->slot_bytes + tr->offset[ci] +
                ((size_t)(y % per_slot) * c->blocks_per_row + x) * sizeof(JBLOCK);
    size_t length = (size_t)count * sizeof(JBLOCK), done = 0;
    while (done < length) {
        ssize_t n = pread(tr->fd, (char *)out + done, length - done, (off_t)(at + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EIO;
        done += (size_t)n;
    }
    return 0;
}

/* How a block turns: coefficient (v, u) of the upright block is the stored block's (u, v) when
   transposed, negated where a flipped axis has an odd frequency (cos((2(7-x)+1)u pi/16) =
   (-1)^u cos((2x+1)u pi/16)). */
static void plan_block_turn(turning *tr) {
    for (int v = 0; v < DCTSIZE; v++)
        for (int u = 0; u < DCTSIZE; u++) {
            int sv = tr->turn.transpose ? u : v, su = tr->turn.transpose ? v : u;
            tr->from[v * DCTSIZE + u] = (uint8_t)(sv * DCTSIZE + su);
            tr->negate[v * DCTSIZE + u] = (tr->turn.flip_x && (su & 1)) != (tr->turn.flip_y && (sv & 1)) ? -1 : 0;
        }
}

/* A block turned: (x ^ -1) - -1 = -x, (x ^ 0) - 0 = x. */
static inline void turn_block(const turning *tr, const JCOEF *in, JCOEF *out) {
    for (int k = 0; k < DCTSIZE2; k++) out[k] = (JCOEF)((in[tr->from[k]] ^ tr->negate[k]) - tr->negate[k]);
}

/* Upright block rows [top, top + rows) of component `ci` into its strip, turned: 0 or an errno. */
static int fill_strip(turning *tr, int ci, JDIMENSION top, JDIMENSION rows) {
    const plan_component *s = &tr->source->component[ci];
    JDIMENSION width = s->blocks_wide, height = s->block_rows;
    JDIMENSION upright_width = tr->turned->component[ci].blocks_wide;
    JBLOCK *strip = tr->strip[ci];
    if (!tr->turn.transpose) { /* upright row r is a stored row, its blocks mirrored or not */
        for (JDIMENSION r = 0; r < rows; r++) {
            JDIMENSION y = tr->turn.flip_y ? height - 1 - (top + r) : top + r;
            int error = read_blocks(tr, ci, y, 0, width, tr->line);
            if (error) return error;
            for (JDIMENSION x = 0; x < width; x++)
                turn_block(tr, tr->line[tr->turn.flip_x ? width - 1 - x : x], strip[r * upright_width + x]);
        }
        return 0;
    }
    /* Transposed: upright rows [top, top + rows) are stored columns, read a stored row at a time. */
    JDIMENSION first = tr->turn.flip_x ? width - (top + rows) : top;
    for (JDIMENSION y = 0; y < height; y++) {
        int error = read_blocks(tr, ci, y, first, rows, tr->line);
        if (error) return error;
        JDIMENSION x = tr->turn.flip_y ? height - 1 - y : y;
        for (JDIMENSION k = 0; k < rows; k++) {
            JDIMENSION upright_row = tr->turn.flip_x ? width - 1 - (first + k) : first + k;
            turn_block(tr, tr->line[k], strip[(upright_row - top) * upright_width + x]);
        }
    }
    return 0;
}

/* Codes the tiles of upright tile row `row` and hands them to `writer`: 0 or an errno. */
static int code_tile_row(turning *tr, uint32_t row, cjs_tiff_writer *writer) {
    const transcode_plan *p = tr->turned;
    uint32_t mcus_across = p->tile_size / (8u * (uint32_t)p->max_h), mcus_down = p->tile_size / (8u * (uint32_t)p->max_v);
    uint32_t columns = (p->width + p->tile_size - 1) / p->tile_size;
    JDIMENSION held[PLAN_MAX_COMPONENTS];
    size_t blocks = 0;
    for (int ci = 0; ci < p->components; ci++) {
        const plan_component *c = &p->component[ci];
        JDIMENSION top = (JDIMENSION)row * tr->strip_rows[ci];
        held[ci] = c->block_rows - top < tr->strip_rows[ci] ? c->block_rows - top : tr->strip_rows[ci];
        int error = fill_strip(tr, ci, top, held[ci]);
        if (error) return error;
        blocks += (size_t)(c->h * c->v);
    }
    huffman_stream *s = &tr->stream;
    for (uint32_t column = 0; column < columns; column++) {
        if (huffman_reserve(s, p->header_length)) return ENOMEM;
        huffman_begin(s, p->header, p->header_length);
        for (uint32_t my = 0; my < mcus_down; my++)
            for (uint32_t mx = 0; mx < mcus_across; mx++) {
                if (huffman_reserve(s, blocks * HUFFMAN_BLOCK_BYTES)) return ENOMEM;
                for (int ci = 0; ci < p->components; ci++) {
                    const plan_component *c = &p->component[ci];
                    const huffman_codes *dc = &tr->dc[c->table], *ac = &tr->ac[c->table];
                    for (int by = 0; by < c->v; by++)
                        for (int bx = 0; bx < c->h; bx++) {
                            JDIMENSION x = (column * mcus_across + mx) * (JDIMENSION)c->h + (JDIMENSION)bx;
                            JDIMENSION r = my * (JDIMENSION)c->v + (JDIMENSION)by;
                            if (x < c->blocks_wide && r < held[ci]) {
                                huffman_block(s, tr->strip[ci][r * c->blocks_wide + x], ci, dc, ac, &tr->order);
                                continue;
                            }
                            /* Padding past the image: flat, the DC of the nearest block inside. */
                            JDIMENSION nx = x < c->blocks_wide ? x : c->blocks_wide - 1, nr = r < held[ci] ? r : held[ci] - 1;
                            huffman_flat_block(s, tr->strip[ci][nr * c->blocks_wide + nx][0], ci, dc, ac);
                        }
                }
            }
        if (huffman_reserve(s, 16)) return ENOMEM;
        huffman_end(s);
        if (cjs_tiff_writer_put_tile(writer, 0, column, row, s->data, s->length) != CJS_OK) {
            int number = cjs_tiff_writer_errno(writer);
            return number ? number : EIO;
        }
    }
    return 0;
}

static int prepare(turning *tr) {
    const transcode_plan *p = tr->turned, *source = tr->source;
    for (int i = 0; i < 2; i++)
        if (huffman_derive(&tr->dc[i], p->dc[i].bits, p->dc[i].values) ||
            huffman_derive(&tr->ac[i], p->ac[i].bits, p->ac[i].values))
            return EINVAL;
    huffman_order_init(&tr->order);
    plan_block_turn(tr);
    size_t offset = 0;
    JDIMENSION widest = 1;
    for (int ci = 0; ci < p->components; ci++) {
        const plan_component *c = &p->component[ci], *s = &source->component[ci];
        tr->offset[ci] = offset;
        offset += (size_t)s->source_v * s->blocks_per_row * sizeof(JBLOCK);
        if (s->blocks_per_row > widest) widest = s->blocks_per_row;
        tr->strip_rows[ci] = p->tile_size / (8u * (uint32_t)p->max_v) * (JDIMENSION)c->v;
        if (!(tr->strip[ci] = malloc((size_t)tr->strip_rows[ci] * c->blocks_wide * sizeof(JBLOCK)))) return ENOMEM;
    }
    if (offset != tr->slot_bytes) return EINVAL;
    return (tr->line = malloc((size_t)widest * sizeof(JBLOCK))) ? 0 : ENOMEM;
}

int turned_level_write(const transcode_plan *source, const transcode_plan *turned, int fd, size_t slot_bytes,
                       cjs_tiff_writer *writer, int (*should_stop)(void *), void *context) {
    turning *tr = calloc(1, sizeof *tr);
    if (!tr) return ENOMEM;
    tr->source = source;
    tr->turned = turned;
    tr->turn = plan_turn_of(turned->orientation);
    tr->fd = fd;
    tr->slot_bytes = slot_bytes;
    int error = prepare(tr);
    uint32_t rows = (turned->height + turned->tile_size - 1) / turned->tile_size;
    for (uint32_t row = 0; row < rows && !error; row++)
        error = should_stop(context) ? ECANCELED : code_tile_row(tr, row, writer);
    for (int ci = 0; ci < PLAN_MAX_COMPONENTS; ci++) free(tr->strip[ci]);
    free(tr->line);
    free(tr->stream.data);
    free(tr);
    return error;
}
