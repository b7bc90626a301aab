/*
 * export.c: encoded tiles straight from the pyramid's rows. Each level's rows are gathered into a
 * strip per tile row (its rows plus `overlap` above and below, as DeepZoom defines tiles); a full
 * strip is queued, and encoder threads take its tiles one at a time, encode them (tile_codec.c) and
 * queue the bytes, which the owner takes with cjs_export_next_tile and writes where its layout says.
 * Memory: two strips per level (one filling, one being encoded) and a bounded queue of encoded tiles.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tile_codec.h"

enum { STRIPS = 2, MAX_THREADS = 16 };
enum { STRIP_FREE = 0, STRIP_FILLING, STRIP_QUEUED };

typedef struct strip {
    uint8_t *data;          /* (tile_size + 2 * overlap) rows of the level */
    uint32_t level;
    uint32_t tile_row;
    uint32_t top;           /* the level row of its first row */
    uint32_t rows;
    uint32_t next_column;   /* the next tile to hand out (lock) */
    uint32_t done;          /* tiles finished (lock) */
    int state;              /* lock */
    struct strip *next;     /* in the queue of strips with tiles to hand out */
} strip;

typedef struct {
    uint32_t width, height, columns, rows;
    strip strips[STRIPS];
    strip *filling;         /* the pusher's own */
    strip *last_queued;     /* the strip of the tile row above the next: its overlap rows */
    uint32_t rows_pushed;
} export_level;

typedef struct encoded {
    cjs_export_tile tile;
    struct encoded *next;
} encoded;

struct cjs_export {
    cjs_export_options options;
    export_level *levels;
    uint32_t count;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    strip *queue_head, *queue_tail;   /* strips with tiles not yet handed out */
    encoded *out_head, *out_tail;     /* encoded tiles not yet taken */
    uint32_t out_count;
    uint64_t tiles_total, tiles_taken;
    pthread_t threads[MAX_THREADS];
    uint32_t threads_started;
    int stopping;
    int failed;                       /* a cjs_status */
    int error_number;
};

/* The level rows DeepZoom tile row `r` covers: [start, end). */
static uint32_t strip_start(const cjs_export *e, uint32_t r) {
    uint32_t t = e->options.tile_size, o = e->options.overlap;
    return r * t > o ? r * t - o : 0;
}

static uint32_t strip_end(const cjs_export *e, const export_level *l, uint32_t r) {
    uint64_t end = (uint64_t)(r + 1) * e->options.tile_size + e->options.overlap;
    return end < l->height ? (uint32_t)end : l->height;
}

static void fail_locked(cjs_export *e, cjs_status status, int error_number) {
    if (!e->failed) {
        e->failed = status;
        e->error_number = error_number;
    }
    pthread_cond_broadcast(&e->changed);
}

/* ---- encoder threads --------------------------------------------------------------------- */

/* The next tile to encode (lock held): waits for one; NULL when stopping or failed. */
static strip *take_work(cjs_export *e, uint32_t *column) {
    for (;;) {
        if (e->stopping || e->failed) return NULL;
        strip *s = e->queue_head;
        if (s && e->out_count < e->options.queue_limit) {
            *column = s->next_column++;
            if (s->next_column == e->levels[s->level].columns) {
                e->queue_head = s->next;
                if (!e->queue_head) e->queue_tail = NULL;
            }
            return s;
        }
        pthread_cond_wait(&e->changed, &e->lock);
    }
}

static cjs_status encode_tile(cjs_export *e, tile_jpeg *jpeg, const strip *s, uint32_t column, cjs_bytes *out) {
    const export_level *l = &e->levels[s->level];
    uint32_t t = e->options.tile_size, o = e->options.overlap;
    uint32_t x0 = column * t > o ? column * t - o : 0;
    uint64_t x1 = (uint64_t)(column + 1) * t + o;
    if (x1 > l->width) x1 = l->width;
    size_t stride = (size_t)l->width * 4;
    const uint8_t *first = s->data + (size_t)x0 * 4;
    const void *icc = e->options.icc_profile;
    size_t n = e->options.icc_profile_length;
    if (e->options.format == CJS_TILE_PNG) return tile_png_encode(first, stride, (uint32_t)x1 - x0, s->rows, 0, icc, n, out, NULL, NULL);
    return tile_jpeg_encode(jpeg, first, stride, (uint32_t)x1 - x0, s->rows, icc, n, out);
}

static void *encoder_main(void *arg) {
    cjs_export *e = arg;
    tile_jpeg *jpeg = NULL;
    cjs_status created = e->options.format == CJS_TILE_PNG ? CJS_OK : tile_jpeg_create(e->options.quality, 0, &jpeg);
    pthread_mutex_lock(&e->lock);
    if (created != CJS_OK) fail_locked(e, created, created == CJS_ERR_NOMEM ? ENOMEM : 0);
    uint32_t column;
    strip *s;
    while ((s = take_work(e, &column))) {
        pthread_mutex_unlock(&e->lock);
        cjs_bytes bytes = {0};
        encoded *item = malloc(sizeof *item);
        cjs_status status = item ? encode_tile(e, jpeg, s, column, &bytes) : CJS_ERR_NOMEM;
        pthread_mutex_lock(&e->lock);
        if (status != CJS_OK) {
            free(bytes.data);
            free(item);
            fail_locked(e, status, status == CJS_ERR_NOMEM ? ENOMEM : 0);
            break;
        }
        item->tile = (cjs_export_tile){
            .level = s->level, .column = column, .row = s->tile_row, .bytes = bytes.data, .length = bytes.length};
        item->next = NULL;
        if (e->out_tail) e->out_tail->next = item;
        else e->out_head = item;
        e->out_tail = item;
        e->out_count++;
        if (++s->done == e->levels[s->level].columns) s->state = STRIP_FREE;
        pthread_cond_broadcast(&e->changed);
    }
    pthread_mutex_unlock(&e->lock);
    tile_jpeg_destroy(jpeg);
    return NULL;
}

/* ---- creation ---------------------------------------------------------------------------- */

static cjs_status create_levels(cjs_export *e, const uint32_t *widths, const uint32_t *heights) {
    uint32_t t = e->options.tile_size, o = e->options.overlap;
    for (uint32_t i = 0; i < e->count; i++) {
        export_level *l = &e->levels[i];
        if (widths[i] == 0 || heights[i] == 0 || widths[i] > 1u << 20 || heights[i] > 1u << 20) return CJS_ERR_ARGUMENT;
        l->width = widths[i];
        l->height = heights[i];
        l->columns = (widths[i] + t - 1) / t;
        l->rows = (heights[i] + t - 1) / t;
        e->tiles_total += (uint64_t)l->columns * l->rows;
        uint32_t capacity = t + 2 * o < l->height ? t + 2 * o : l->height;
        for (int s = 0; s < STRIPS; s++) {
            l->strips[s].level = i;
            l->strips[s].data = malloc((size_t)capacity * l->width * 4);
            if (!l->strips[s].data) return CJS_ERR_NOMEM;
        }
    }
    return CJS_OK;
}

cjs_status cjs_export_create(const cjs_export_options *options, const uint32_t *widths, const uint32_t *heights,
                             uint32_t count, cjs_export **out) {
    if (!options || !widths || !heights || !out || count == 0 || count > 64) return CJS_ERR_ARGUMENT;
    *out = NULL;
    const cjs_export_options *o = options;
    if (o->tile_size < 1 || o->tile_size > 8192 || o->overlap >= o->tile_size || o->threads < 1 ||
        o->threads > MAX_THREADS || (o->format != CJS_TILE_JPEG && o->format != CJS_TILE_PNG))
        return CJS_ERR_ARGUMENT;
    cjs_export *e = calloc(1, sizeof *e);
    if (!e) return CJS_ERR_NOMEM;
    e->options = *options;
    e->options.icc_profile = NULL;
    e->options.icc_profile_length = 0;
    if (o->icc_profile && o->icc_profile_length) { /* the export's own copy */
        void *icc = malloc(o->icc_profile_length);
        if (!icc) {
            free(e);
            return CJS_ERR_NOMEM;
        }
        memcpy(icc, o->icc_profile, o->icc_profile_length);
        e->options.icc_profile = icc;
        e->options.icc_profile_length = o->icc_profile_length;
    }
    if (e->options.queue_limit == 0) e->options.queue_limit = 256;
    e->count = count;
    if (pthread_mutex_init(&e->lock, NULL) != 0) {
        free((void *)e->options.icc_profile);
        free(e);
        return CJS_ERR_NOMEM;
    }
    if (pthread_cond_init(&e->changed, NULL) != 0) {
        pthread_mutex_destroy(&e->lock);
        free((void *)e->options.icc_profile);
        free(e);
        return CJS_ERR_NOMEM;
    }
    e->levels = calloc(count, sizeof *e->levels);
    cjs_status status = e->levels ? create_levels(e, widths, heights) : CJS_ERR_NOMEM;
    for (uint32_t i = 0; i < o->threads && status == CJS_OK; i++) {
        if (pthread_create(&e->threads[i], NULL, encoder_main, e) != 0) status = CJS_ERR_NOMEM;
        else e->threads_started++;
    }
    if (status != CJS_OK) {
        cjs_export_destroy(e);
        return status;
    }
    *out = e;
    return CJS_OK;
}

void cjs_export_destroy(cjs_export *e) {
    if (!e) return;
    pthread_mutex_lock(&e->lock);
    e->stopping = 1;
    pthread_cond_broadcast(&e->changed);
    pthread_mutex_unlock(&e->lock);
    for (uint32_t i = 0; i < e->threads_started; i++) pthread_join(e->threads[i], NULL);
    while (e->out_head) {
        encoded *next = e->out_head->next;
        free((void *)e->out_head->tile.bytes);
        free(e->out_head);
        e->out_head = next;
    }
    for (uint32_t i = 0; e->levels && i < e->count; i++)
        for (int s = 0; s < STRIPS; s++) free(e->levels[i].strips[s].data);
    free(e->levels);
    free((void *)e->options.icc_profile);
    pthread_cond_destroy(&e->changed);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

/* ---- rows in ----------------------------------------------------------------------------- */

/* A free strip for the level's next tile row, with the overlap rows it shares with the strip before
 * copied in (that strip may be being encoded: only this thread ever writes a strip). */
static cjs_status begin_strip(cjs_export *e, export_level *l, uint32_t tile_row, const strip *before) {
    pthread_mutex_lock(&e->lock);
    strip *s = NULL;
    while (!s && !e->failed && !e->stopping) {
        for (int i = 0; i < STRIPS && !s; i++)
            if (l->strips[i].state == STRIP_FREE && &l->strips[i] != before) s = &l->strips[i];
        if (!s) pthread_cond_wait(&e->changed, &e->lock);
    }
    int failed = e->failed || e->stopping;
    if (s) s->state = STRIP_FILLING;
    pthread_mutex_unlock(&e->lock);
    if (failed) return CJS_ERR_IO;
    s->tile_row = tile_row;
    s->top = strip_start(e, tile_row);
    s->rows = 0;
    s->next_column = 0;
    s->done = 0;
    if (before && tile_row > 0) {
        uint32_t shared_end = strip_end(e, l, tile_row - 1);
        size_t row_bytes = (size_t)l->width * 4;
        s->rows = shared_end - s->top;
        memcpy(s->data, before->data + (size_t)(s->top - before->top) * row_bytes, s->rows * row_bytes);
    }
    l->filling = s;
    return CJS_OK;
}

/* Hands a full strip to the encoders. */
static cjs_status queue_strip(cjs_export *e, export_level *l, strip *s) {
    l->filling = NULL;
    l->last_queued = s;
    pthread_mutex_lock(&e->lock);
    s->state = STRIP_QUEUED;
    s->next = NULL;
    if (e->queue_tail) e->queue_tail->next = s;
    else e->queue_head = s;
    e->queue_tail = s;
    int failed = e->failed;
    pthread_cond_broadcast(&e->changed);
    pthread_mutex_unlock(&e->lock);
    return failed ? CJS_ERR_IO : CJS_OK;
}

cjs_status cjs_export_push_row(cjs_export *e, uint32_t level, const void *row) {
    if (level >= e->count || !row) return CJS_ERR_ARGUMENT;
    export_level *l = &e->levels[level];
    if (l->rows_pushed >= l->height) return CJS_ERR_ARGUMENT;
    uint32_t y = l->rows_pushed;
    cjs_status status = CJS_OK;
    if (!l->filling) status = begin_strip(e, l, y / e->options.tile_size, l->last_queued);
    if (status != CJS_OK) return status;
    strip *s = l->filling;
    size_t row_bytes = (size_t)l->width * 4;
    memcpy(s->data + (size_t)(y - s->top) * row_bytes, row, row_bytes);
    s->rows = y + 1 - s->top;
    l->rows_pushed++;
    if (y + 1 < strip_end(e, l, s->tile_row)) return CJS_OK;
    status = queue_strip(e, l, s);
    /* A last tile row lying wholly inside the overlap below the one before has all its rows now. */
    while (status == CJS_OK && l->rows_pushed == l->height && l->last_queued->tile_row + 1 < l->rows) {
        status = begin_strip(e, l, l->last_queued->tile_row + 1, l->last_queued);
        if (status == CJS_OK) status = queue_strip(e, l, l->filling);
    }
    return status;
}

/* ---- tiles out --------------------------------------------------------------------------- */

cjs_status cjs_export_next_tile(cjs_export *e, cjs_export_tile *tile) {
    pthread_mutex_lock(&e->lock);
    while (!e->out_head && !e->failed && !e->stopping && e->tiles_taken < e->tiles_total)
        pthread_cond_wait(&e->changed, &e->lock);
    cjs_status status = CJS_DONE;
    if (e->failed) status = e->failed;
    else if (e->stopping) status = CJS_ERR_STATE;
    else if (e->out_head) {
        encoded *item = e->out_head;
        e->out_head = item->next;
        if (!e->out_head) e->out_tail = NULL;
        e->out_count--;
        e->tiles_taken++;
        *tile = item->tile;
        free(item);
        status = CJS_OK;
        pthread_cond_broadcast(&e->changed); /* room in the queue */
    }
    pthread_mutex_unlock(&e->lock);
    return status;
}

void cjs_export_release_tile(cjs_export_tile *tile) {
    if (!tile) return;
    free((void *)tile->bytes);
    tile->bytes = NULL;
    tile->length = 0;
}

void cjs_export_fail(cjs_export *e, int32_t error_number) {
    pthread_mutex_lock(&e->lock);
    fail_locked(e, CJS_ERR_IO, error_number);
    pthread_mutex_unlock(&e->lock);
}

int32_t cjs_export_errno(cjs_export *e) {
    pthread_mutex_lock(&e->lock);
    int32_t number = e->error_number;
    pthread_mutex_unlock(&e->lock);
    return number;
}

uint64_t cjs_export_tiles_taken(cjs_export *e) {
    pthread_mutex_lock(&e->lock);
    uint64_t taken = e->tiles_taken;
    pthread_mutex_unlock(&e->lock);
    return taken;
}
