/* transcoder.c: level 0's tiles from the committed iMCU rows of a JPEG's coefficients (transcoder.h). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "huffman.h"
#include "transcoder.h"
#include "turned_level.h"

/* iMCU rows in the ring (besides a turned image's two bands): the decoder fills one while the thread
   codes the others. */
enum { RING_ROWS = 4 };

struct transcoder {
    transcode_plan plan;
    cjs_tiff_writer *writer;
    coefficient_sink sink;
    int stream;
    transcode_plan turned;       /* a turned image's upright tiles (orientation 0: not turned) */
    turned_coder *turner;        /* codes them a band of iMCU rows at a time, or NULL */
    JDIMENSION ring_rows;        /* iMCU rows the ring holds */
    uint32_t columns;            /* tile columns */
    uint32_t mcus_per_tile;      /* MCUs across a tile */
    uint32_t mcu_rows_per_tile;
    uint32_t mcu_rows;           /* tile MCU rows the image's iMCU rows hold */
    JBLOCK *memory;
    JBLOCKROW *pointers;
    JBLOCKARRAY (*slots)[PLAN_MAX_COMPONENTS]; /* ring_rows of them */
    size_t component_bytes[PLAN_MAX_COMPONENTS]; /* one slot's rows of a component */
    huffman_stream *streams;     /* one per tile column */
    huffman_codes dc[2], ac[2];
    huffman_order order;
    JCOEF *last_dc[PLAN_MAX_COMPONENTS]; /* the DC of each block of the last block row coded */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t thread;
    int started;
    int stopping;
    int error;                   /* errno of the first failure */
    JDIMENSION committed;        /* iMCU rows below this are final */
    JDIMENSION coded;            /* iMCU rows below this are coded (their slots free) */
};

static JBLOCKARRAY sink_rows(void *context, int component, JDIMENSION row, int *error_number) {
    transcoder *t = context;
    if (component < 0 || component >= t->plan.components || row >= t->plan.imcu_rows) {
        *error_number = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&t->lock);
    while (!t->error && !t->stopping && row >= t->coded + t->ring_rows) pthread_cond_wait(&t->changed, &t->lock);
    int failed = t->error ? t->error : (t->stopping ? ECANCELED : 0);
    int coded = row < t->coded; /* a row already coded (and its room reused): the decoder went back */
    pthread_mutex_unlock(&t->lock);
    if (failed || coded) {
        *error_number = failed ? failed : EINVAL;
        return NULL;
    }
    return t->slots[row % t->ring_rows][component];
}

static int sink_commit(void *context, JDIMENSION end) {
    transcoder *t = context;
    pthread_mutex_lock(&t->lock);
    if (end > t->plan.imcu_rows) end = t->plan.imcu_rows;
    if (end > t->committed) {
        t->committed = end;
        pthread_cond_broadcast(&t->changed);
    }
    int error = t->error;
    pthread_mutex_unlock(&t->lock);
    return error;
}

/* Codes one block of a tile's MCU: the source's, or past the array's right edge, a flat copy of the
   row's last DC. */
static void code_block(transcoder *t, huffman_stream *s, int ci, JBLOCKROW row, JDIMENSION b) {
    const plan_component *c = &t->plan.component[ci];
    const huffman_codes *dc = &t->dc[c->table], *ac = &t->ac[c->table];
    if (b < c->blocks_per_row) {
        huffman_block(s, row[b], ci, dc, ac, &t->order);
        t->last_dc[ci][b] = row[b][0];
    } else {
        huffman_flat_block(s, row[c->blocks_per_row - 1][0], ci, dc, ac);
    }
}

/* Codes MCU row `sub` of iMCU row `slot` for tile column `column`: 0, or ENOMEM. */
static int code_mcu_row(transcoder *t, uint32_t column, int slot, int sub) {
    huffman_stream *s = &t->streams[column];
    const transcode_plan *p = &t->plan;
    size_t blocks = 0;
    for (int ci = 0; ci < p->components; ci++) blocks += (size_t)(p->component[ci].h * p->component[ci].v);
    if (huffman_reserve(s, blocks * t->mcus_per_tile * HUFFMAN_BLOCK_BYTES)) return ENOMEM;
    for (uint32_t mx = 0; mx < t->mcus_per_tile; mx++) {
        JDIMENSION mcu = column * t->mcus_per_tile + mx;
        for (int ci = 0; ci < p->components; ci++) {
            const plan_component *c = &p->component[ci];
            for (int by = 0; by < c->v; by++) {
                JBLOCKROW row = t->slots[slot][ci][sub * c->v + by];
                for (int bx = 0; bx < c->h; bx++) code_block(t, s, ci, row, mcu * (JDIMENSION)c->h + (JDIMENSION)bx);
            }
        }
    }
    return 0;
}

/* Codes a padding MCU row below the image for tile column `column`: flat blocks, the DCs of the last
   block row coded. */
static int code_padding_row(transcoder *t, uint32_t column) {
    huffman_stream *s = &t->streams[column];
    const transcode_plan *p = &t->plan;
    size_t blocks = 0;
    for (int ci = 0; ci < p->components; ci++) blocks += (size_t)(p->component[ci].h * p->component[ci].v);
    if (huffman_reserve(s, blocks * t->mcus_per_tile * HUFFMAN_BLOCK_BYTES)) return ENOMEM;
    for (uint32_t mx = 0; mx < t->mcus_per_tile; mx++) {
        JDIMENSION mcu = column * t->mcus_per_tile + mx;
        for (int ci = 0; ci < p->components; ci++) {
            const plan_component *c = &p->component[ci];
            const huffman_codes *dc = &t->dc[c->table], *ac = &t->ac[c->table];
            for (int by = 0; by < c->v; by++)
                for (int bx = 0; bx < c->h; bx++) {
                    JDIMENSION b = mcu * (JDIMENSION)c->h + (JDIMENSION)bx;
                    if (b >= c->blocks_per_row) b = c->blocks_per_row - 1;
                    huffman_flat_block(s, t->last_dc[ci][b], ci, dc, ac);
                }
        }
    }
    return 0;
}

static int begin_tiles(transcoder *t) {
    for (uint32_t c = 0; c < t->columns; c++) {
        if (huffman_reserve(&t->streams[c], t->plan.header_length)) return ENOMEM;
        huffman_begin(&t->streams[c], t->plan.header, t->plan.header_length);
    }
    return 0;
}

/* Ends tile row `tile_row`'s tiles and hands them to the writer: 0 or an errno. */
static int end_tiles(transcoder *t, uint32_t tile_row) {
    for (uint32_t c = 0; c < t->columns; c++) {
        huffman_stream *s = &t->streams[c];
        if (huffman_reserve(s, 16)) return ENOMEM;
        huffman_end(s);
        if (cjs_tiff_writer_put_tile(t->writer, 0, c, tile_row, s->data, s->length) != CJS_OK) {
            int number = cjs_tiff_writer_errno(t->writer);
            return number ? number : EIO;
        }
    }
    return 0;
}

/* Codes tile MCU row `m` of the image (`slot` holds its iMCU row; -1: padding below the image). */
static int code_row(transcoder *t, uint32_t m, int slot, int sub) {
    uint32_t in_tile = m % t->mcu_rows_per_tile;
    int error = in_tile == 0 ? begin_tiles(t) : 0;
    for (uint32_t c = 0; c < t->columns && !error; c++)
        error = slot >= 0 ? code_mcu_row(t, c, slot, sub) : code_padding_row(t, c);
    if (!error && in_tile == t->mcu_rows_per_tile - 1) error = end_tiles(t, m / t->mcu_rows_per_tile);
    return error;
}

/* Codes iMCU row `row` (and, after the last, the padding that completes the last tile row). */
static int code_imcu_row(transcoder *t, JDIMENSION row) {
    int slot = (int)(row % t->ring_rows);
    int error = 0;
    for (int sub = 0; sub < t->plan.sub_rows && !error; sub++)
        error = code_row(t, (uint32_t)row * (uint32_t)t->plan.sub_rows + (uint32_t)sub, slot, sub);
    if (!error && row + 1 == t->plan.imcu_rows)
        for (uint32_t m = t->mcu_rows; m % t->mcu_rows_per_tile != 0 && !error; m++) error = code_row(t, m, -1, 0);
    if (t->stream) /* libjpeg expects the rows it is given to be zero */
        for (int ci = 0; ci < t->plan.components; ci++) memset(t->slots[slot][ci][0], 0, t->component_bytes[ci]);
    return error;
}

/* A turned image's stored block row `y` of component `ci`, in the ring. */
static JBLOCKROW ring_row(void *context, int ci, JDIMENSION y) {
    transcoder *t = context;
    JDIMENSION per_row = (JDIMENSION)t->plan.component[ci].source_v;
    return t->slots[(y / per_row) % t->ring_rows][ci][y % per_row];
}

/* Codes the upright tiles of a turned image's band of iMCU rows [start, end), then frees its rows. */
static int code_turned_band(transcoder *t, JDIMENSION start, JDIMENSION end) {
    int error = turned_coder_band(t->turner, start, ring_row, t, t->writer);
    for (JDIMENSION row = start; row < end && t->stream; row++) /* libjpeg expects its rows zero */
        for (int ci = 0; ci < t->plan.components; ci++)
            memset(t->slots[row % t->ring_rows][ci][0], 0, t->component_bytes[ci]);
    return error;
}

static void *transcoder_main(void *argument) {
    transcoder *t = argument;
    pthread_mutex_lock(&t->lock);
    while (t->coded < t->plan.imcu_rows && !t->stopping && !t->error) {
        /* An iMCU row at a time, or a turned image's band of them. */
        JDIMENSION end = t->turner ? turned_band_end(t->turner, t->coded) : t->coded + 1;
        if (t->committed < end) {
            pthread_cond_wait(&t->changed, &t->lock);
            continue;
        }
        JDIMENSION row = t->coded;
        pthread_mutex_unlock(&t->lock);
        int error = t->turner ? code_turned_band(t, row, end) : code_imcu_row(t, row);
        pthread_mutex_lock(&t->lock);
        if (error) t->error = error;
        else t->coded = end;
        pthread_cond_broadcast(&t->changed);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

/* The ring: ring_rows slots, each every component's source_v rows of blocks_per_row blocks, zeroed. */
static int make_ring(transcoder *t) {
    const transcode_plan *p = &t->plan;
    size_t slot_bytes = 0, rows = 0;
    for (int ci = 0; ci < p->components; ci++) {
        t->component_bytes[ci] = (size_t)p->component[ci].source_v * p->component[ci].blocks_per_row * sizeof(JBLOCK);
        slot_bytes += t->component_bytes[ci];
        rows += (size_t)p->component[ci].source_v;
    }
    t->memory = calloc(t->ring_rows, slot_bytes);
    t->pointers = malloc(t->ring_rows * rows * sizeof(JBLOCKROW));
    t->slots = malloc(t->ring_rows * sizeof *t->slots);
    if (!t->memory || !t->pointers || !t->slots) return ENOMEM;
    char *next = (char *)t->memory;
    JBLOCKROW *pointer = t->pointers;
    for (JDIMENSION slot = 0; slot < t->ring_rows; slot++)
        for (int ci = 0; ci < p->components; ci++) {
            t->slots[slot][ci] = pointer;
            for (int r = 0; r < p->component[ci].source_v; r++) {
                *pointer++ = (JBLOCKROW)(void *)next;
                next += (size_t)p->component[ci].blocks_per_row * sizeof(JBLOCK);
            }
        }
    return 0;
}

static int prepare(transcoder *t) {
    const transcode_plan *p = &t->plan;
    uint32_t mcu_width = 8u * (uint32_t)p->max_h, mcu_height = 8u * (uint32_t)p->max_v;
    t->columns = (p->width + p->tile_size - 1) / p->tile_size;
    t->mcus_per_tile = p->tile_size / mcu_width;
    t->mcu_rows_per_tile = p->tile_size / mcu_height;
    t->mcu_rows = (uint32_t)p->imcu_rows * (uint32_t)p->sub_rows;
    for (int i = 0; i < 2; i++)
        if (huffman_derive(&t->dc[i], p->dc[i].bits, p->dc[i].values) ||
            huffman_derive(&t->ac[i], p->ac[i].bits, p->ac[i].values))
            return EINVAL;
    huffman_order_init(&t->order);
    t->streams = calloc(t->columns, sizeof *t->streams);
    if (!t->streams) return ENOMEM;
    for (int ci = 0; ci < p->components; ci++)
        if (!(t->last_dc[ci] = calloc(p->component[ci].blocks_per_row, sizeof(JCOEF)))) return ENOMEM;
    t->ring_rows = RING_ROWS;
    if (t->turned.orientation) { /* a whole band, and room to decode the next while it is coded */
        int error = turned_coder_create(&t->plan, &t->turned, &t->turner);
        if (error) return error;
        t->ring_rows += 2 * turned_band_rows(t->turner);
        if (t->ring_rows > p->imcu_rows) t->ring_rows = p->imcu_rows > 0 ? p->imcu_rows : 1; /* all of them */
    }
    return make_ring(t);
}

cjs_status transcoder_create(transcode_plan *plan, transcode_plan *turned, cjs_tiff_writer *writer, int stream,
                             transcoder **out) {
    *out = NULL;
    transcoder *t = calloc(1, sizeof *t);
    if (!t) {
        transcode_plan_free(plan);
        if (turned) transcode_plan_free(turned);
        return CJS_ERR_NOMEM;
    }
    t->plan = *plan;
    if (turned) t->turned = *turned;
    t->writer = writer;
    t->stream = stream;
    t->sink = (coefficient_sink){.rows = sink_rows, .commit = sink_commit, .context = t};
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
    int error = prepare(t);
    if (!error && pthread_create(&t->thread, NULL, transcoder_main, t) != 0) error = ENOMEM;
    t->started = !error;
    if (error) {
        transcoder_destroy(t);
        return error == ENOMEM ? CJS_ERR_NOMEM : CJS_ERR_ARGUMENT;
    }
    *out = t;
    return CJS_OK;
}

const coefficient_sink *transcoder_sink(transcoder *t) { return &t->sink; }

int transcoder_wait(transcoder *t) {
    pthread_mutex_lock(&t->lock);
    while (!t->error && t->coded < t->plan.imcu_rows) {
        if (t->committed < t->plan.imcu_rows) { /* rows the decoder never committed: it stopped early */
            pthread_mutex_unlock(&t->lock);
            return EINVAL;
        }
        pthread_cond_wait(&t->changed, &t->lock);
    }
    int error = t->error;
    pthread_mutex_unlock(&t->lock);
    return error;
}

/* The committed rows the thread will code without more: all of them, or a turned image's whole bands. */
static JDIMENSION codable(const transcoder *t) {
    if (!t->turner) return t->committed;
    JDIMENSION end = t->coded;
    while (end < t->plan.imcu_rows && turned_band_end(t->turner, end) <= t->committed) end = turned_band_end(t->turner, end);
    return end;
}

int transcoder_sync(transcoder *t) {
    pthread_mutex_lock(&t->lock);
    while (!t->error && !t->stopping && t->coded < codable(t)) pthread_cond_wait(&t->changed, &t->lock);
    int error = t->error;
    pthread_mutex_unlock(&t->lock);
    return error;
}

void transcoder_destroy(transcoder *t) {
    if (!t) return;
    if (t->started) {
        pthread_mutex_lock(&t->lock);
        t->stopping = 1;
        pthread_cond_broadcast(&t->changed);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->thread, NULL);
    }
    for (uint32_t c = 0; t->streams && c < t->columns; c++) free(t->streams[c].data);
    free(t->streams);
    for (int ci = 0; ci < PLAN_MAX_COMPONENTS; ci++) free(t->last_dc[ci]);
    free(t->memory);
    free(t->pointers);
    free(t->slots);
    turned_coder_destroy(t->turner);
    transcode_plan_free(&t->plan);
    transcode_plan_free(&t->turned);
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
