/*
 * pyramid.c: the orchestrator. Level-0 rows arrive in a ring of slots lent to the decoder; each row
 * goes to level 0's writer and into the 2x2 shrink, whose output rows go to level 1's writer and
 * the next shrink, and so on down. With the band writer on a worker, a worker thread does all of
 * that while the caller decodes the next rows. The writers (writer.h) never call back up here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aio.h"
#include "rows.h"
#include "writer.h"

enum { RING_SLOTS = 4, RING_ROWS = 16 };

typedef struct {
    cjs_level geometry;
    level_writer *writer;
    uint32_t rows_pushed;   /* rows of this level received */
    uint8_t *pending;       /* the shrink into the next level: an even row waiting for its partner */
    int has_pending;
    uint8_t *shrunk;
} pyramid_level;

struct cjs_pyramid {
    pyramid_level *levels;
    uint32_t count;
    const writer_methods *methods;  /* NULL: no level files (CJS_WRITER_NONE) */
    cjs_export *export_to;          /* or NULL */
    writer_shared shared;
    int lock_ready;
    aio_queue *aio;         /* band writer writing behind: its asynchronous writes */
    /* rows lent to the decoder: a ring of slots when threaded, one slot otherwise */
    int ring_slots;
    uint8_t *slots[RING_SLOTS];
    uint32_t slot_rows[RING_SLOTS];
    int slot_filled[RING_SLOTS];
    int fill_index;
    int work_index;
    size_t slot_stride;
    pthread_t worker;
    int worker_running;
};

/* ---- the shrink chain ---------------------------------------------------------------------- */

static cjs_status push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row);

/* Feeds one row of level `index` to the shrink into level index + 1. */
static cjs_status shrink_into_next(cjs_pyramid *p, uint32_t index, const uint8_t *row, int last) {
    pyramid_level *l = &p->levels[index];
    if (!l->has_pending) {
        if (!last) {
            memcpy(l->pending, row, (size_t)l->geometry.width * 4);
            l->has_pending = 1;
            return CJS_OK;
        }
        cjs_shrink_rows(row, row, l->geometry.width, l->shrunk); /* odd last row, with itself */
    } else {
        cjs_shrink_rows(l->pending, row, l->geometry.width, l->shrunk);
        l->has_pending = 0;
    }
    return push_row(p, index + 1, l->shrunk);
}

/* Hands one row of level `index` to its writer, then to the shrink into the next level. */
static cjs_status push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row) {
    pyramid_level *l = &p->levels[index];
    if (l->rows_pushed >= l->geometry.height) return CJS_ERR_ARGUMENT;
    uint32_t y = l->rows_pushed++;
    int last = l->rows_pushed == l->geometry.height;
    cjs_status s = l->writer ? p->methods->push_row(l->writer, row, y, last) : CJS_OK;
    if (s != CJS_OK) return s;
    if (p->export_to && cjs_export_push_row(p->export_to, index, row) != CJS_OK) {
        int32_t number = cjs_export_errno(p->export_to);
        return writer_fail(&p->shared, number ? number : EIO);
    }
    if (index + 1 < p->count) return shrink_into_next(p, index, row, last);
    return CJS_OK;
}

/* ---- the worker thread --------------------------------------------------------------------- */

/* Tiles each filled slot in order, then frees it. */
static void *worker_main(void *arg) {
    cjs_pyramid *p = arg;
    writer_shared *s = &p->shared;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->stopping && !p->slot_filled[p->work_index]) pthread_cond_wait(&s->changed, &s->lock);
        if (s->stopping) break;
        int slot = p->work_index;
        uint32_t rows = p->slot_rows[slot];
        int failed = s->failed;
        pthread_mutex_unlock(&s->lock);
        cjs_status status = CJS_OK;
        for (uint32_t i = 0; i < rows && !failed && status == CJS_OK; i++)
            status = push_row(p, 0, p->slots[slot] + i * p->slot_stride);
        pthread_mutex_lock(&s->lock);
        /* A writer records an I/O failure itself; anything else (a broken invariant) still fails. */
        if (status != CJS_OK && !s->failed) writer_fail_locked(s, EIO);
        p->slot_filled[slot] = 0;
        p->work_index = (slot + 1) % p->ring_slots;
        pthread_cond_broadcast(&s->changed);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int ring_busy(const cjs_pyramid *p) {
    for (int s = 0; s < p->ring_slots; s++)
        if (p->slot_filled[s]) return 1;
    return 0;
}

/* ---- creation and destruction -------------------------------------------------------------- */

static int geometry_is_valid(const cjs_level *g, uint32_t tile_size) {
    return g->width > 0 && g->height > 0 && g->x_offset < tile_size && g->y_offset < tile_size &&
           g->columns > 0 && g->rows > 0 &&
           (uint64_t)g->x_offset + g->width <= (uint64_t)g->columns * tile_size &&
           (uint64_t)g->y_offset + g->height <= (uint64_t)g->rows * tile_size;
}

/* The rows of the shrink from level i into level i + 1. */
static cjs_status create_shrink(cjs_pyramid *p, uint32_t i, const cjs_level *levels) {
    pyramid_level *l = &p->levels[i];
    if (i + 1 < p->count) {
        l->pending = malloc((size_t)levels[i].width * 4);
        l->shrunk = malloc((size_t)levels[i + 1].width * 4 + 4);
        if (!l->pending || !l->shrunk) return CJS_ERR_NOMEM;
    }
    return CJS_OK;
}

static cjs_status create_level(cjs_pyramid *p, uint32_t i, const cjs_level *levels, uint32_t tile_size,
                               const cjs_writer_config *config, uint32_t *progress) {
    pyramid_level *l = &p->levels[i];
    l->geometry = levels[i];
    if (!geometry_is_valid(&levels[i], tile_size)) return CJS_ERR_ARGUMENT;
    int tiff = config->kind == CJS_WRITER_TIFF;
    if (!p->methods || i < config->first_level) return create_shrink(p, i, levels);
    size_t tile_bytes = (size_t)tile_size * tile_size * 4;
    /* The file's full size, sparse: no block is allocated before data arrives. */
    off_t file_bytes = (off_t)levels[i].columns * (off_t)levels[i].rows * (off_t)tile_bytes;
    if (!tiff && ftruncate(levels[i].fd, file_bytes) != 0) return writer_fail(&p->shared, errno);
    writer_setup setup = {
        .level = levels[i], .index = i, .tile_size = tile_size, .tile_bytes = tile_bytes, .config = config,
        .progress = progress ? &progress[i] : NULL, .shared = &p->shared, .aio = p->aio,
    };
    cjs_status s = p->methods->create(&setup, &l->writer);
    if (s != CJS_OK) return s;
    return create_shrink(p, i, levels);
}

/* The worker and, when writing behind, the AIO queue. */
static cjs_status start_threads(cjs_pyramid *p) {
    if (!p->shared.threaded) return CJS_OK;
    if (p->aio) aio_queue_start(p->aio); /* refused AIO: the band writers write synchronously */
    if (pthread_create(&p->worker, NULL, worker_main, p) != 0) return CJS_ERR_NOMEM;
    p->worker_running = 1;
    return CJS_OK;
}

static cjs_status check_config(const cjs_writer_config *c, uint32_t tile_size) {
    if (!c || tile_size < 16 || tile_size > 4096) return CJS_ERR_ARGUMENT;
    if (c->kind == CJS_WRITER_WINDOW) return CJS_OK;
    if (c->kind == CJS_WRITER_NONE) return c->export_to ? CJS_OK : CJS_ERR_ARGUMENT;
    if (c->kind == CJS_WRITER_TIFF) return c->tiff && c->tiff_quality >= 1 && c->tiff_quality <= 100 &&
               (c->tiff_tables == CJS_TABLES_ANNEX_K || c->tiff_tables == CJS_TABLES_FLATTENED) &&
               c->tiff_orientation >= 0 && c->tiff_orientation <= 8 ? CJS_OK : CJS_ERR_ARGUMENT;
    if (c->kind != CJS_WRITER_BANDS) return CJS_ERR_ARGUMENT;
    if (c->band_threading < CJS_BANDS_ON_CALLER || c->band_threading > CJS_BANDS_WRITE_BEHIND) return CJS_ERR_ARGUMENT;
    if (c->band_rows > tile_size || (c->band_rows && tile_size % c->band_rows)) return CJS_ERR_ARGUMENT;
    return CJS_OK;
}

cjs_status cjs_pyramid_create(const cjs_level *levels, uint32_t count, uint32_t tile_size,
                              const cjs_writer_config *writer, uint32_t *progress, cjs_pyramid **out,
                              int32_t *out_error_number) {
    if (out_error_number) *out_error_number = 0;
    if (!out || !levels || count == 0) return CJS_ERR_ARGUMENT;
    *out = NULL;
    cjs_status status = check_config(writer, tile_size);
    if (status != CJS_OK) return status;
    cjs_pyramid *p = calloc(1, sizeof *p);
    if (!p) return CJS_ERR_NOMEM;
    p->count = count;
    p->methods = writer->kind == CJS_WRITER_BANDS    ? &band_writer_methods
                 : writer->kind == CJS_WRITER_WINDOW ? &window_writer_methods
                 : writer->kind == CJS_WRITER_TIFF   ? (writer->tiff_orientation > 1 ? &turned_tiles_writer_methods
                                                                                       : &tiff_level_writer_methods)
                                                     : NULL;
    p->export_to = writer->export_to;
    p->shared.threaded = (writer->kind == CJS_WRITER_BANDS && writer->band_threading != CJS_BANDS_ON_CALLER) ||
                         writer->kind == CJS_WRITER_NONE || writer->kind == CJS_WRITER_TIFF;
    p->ring_slots = p->shared.threaded ? RING_SLOTS : 1;
    /* The lock exists whenever threaded, before anything can fail, so destroy can always take it. */
    if (p->shared.threaded) {
        if (pthread_mutex_init(&p->shared.lock, NULL) != 0) {
            free(p);
            return CJS_ERR_NOMEM;
        }
        if (pthread_cond_init(&p->shared.changed, NULL) != 0) {
            pthread_mutex_destroy(&p->shared.lock);
            free(p);
            return CJS_ERR_NOMEM;
        }
        p->lock_ready = 1;
    }
    p->levels = calloc(count, sizeof *p->levels);
    if (!p->levels) status = CJS_ERR_NOMEM;
    if (status == CJS_OK && p->shared.threaded && writer->band_threading == CJS_BANDS_WRITE_BEHIND)
        status = aio_queue_create(&p->shared, &p->aio);
    for (uint32_t i = 0; i < count && status == CJS_OK; i++)
        status = create_level(p, i, levels, tile_size, writer, progress);
    p->slot_stride = (size_t)levels[0].width * 4;
    for (int s = 0; s < p->ring_slots && status == CJS_OK; s++)
        if (!(p->slots[s] = malloc(p->slot_stride * RING_ROWS))) status = CJS_ERR_NOMEM;
    if (status == CJS_OK) status = start_threads(p);
    if (status != CJS_OK) {
        if (status == CJS_ERR_IO && out_error_number) *out_error_number = p->shared.error_number;
        cjs_pyramid_destroy(p);
        return status;
    }
    *out = p;
    return CJS_OK;
}

void cjs_pyramid_destroy(cjs_pyramid *p) {
    if (!p) return;
    writer_shared *s = &p->shared;
    if (p->worker_running) {
        pthread_mutex_lock(&s->lock);
        s->stopping = 1;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
        pthread_join(p->worker, NULL);
    }
    aio_queue_destroy(p->aio); /* waits for the writes in flight, which read the writers' buffers */
    for (uint32_t i = 0; p->levels && i < p->count; i++) {
        pyramid_level *l = &p->levels[i];
        if (l->writer && p->methods) p->methods->destroy(l->writer);
        free(l->pending);
        free(l->shrunk);
    }
    for (int slot = 0; slot < RING_SLOTS; slot++) free(p->slots[slot]);
    if (p->lock_ready) {
        pthread_cond_destroy(&s->changed);
        pthread_mutex_destroy(&s->lock);
    }
    free(p->levels);
    free(p);
}

/* ---- rows in ------------------------------------------------------------------------------- */

cjs_status cjs_pyramid_acquire_rows(cjs_pyramid *p, void **rows, size_t *stride, uint32_t *capacity) {
    writer_shared *s = &p->shared;
    *stride = p->slot_stride;
    *capacity = RING_ROWS;
    if (!s->threaded) {
        *rows = p->slots[0];
        return s->failed ? CJS_ERR_IO : CJS_OK;
    }
    pthread_mutex_lock(&s->lock);
    while (p->slot_filled[p->fill_index] && !s->failed) pthread_cond_wait(&s->changed, &s->lock);
    int failed = s->failed;
    *rows = p->slots[p->fill_index];
    pthread_mutex_unlock(&s->lock);
    return failed ? CJS_ERR_IO : CJS_OK;
}

cjs_status cjs_pyramid_submit_rows(cjs_pyramid *p, uint32_t count) {
    writer_shared *s = &p->shared;
    if (count > RING_ROWS) return CJS_ERR_ARGUMENT;
    if (!s->threaded) {
        if (s->failed) return CJS_ERR_IO;
        for (uint32_t i = 0; i < count; i++) {
            cjs_status status = push_row(p, 0, p->slots[0] + i * p->slot_stride);
            if (status != CJS_OK) return status;
        }
        return CJS_OK;
    }
    if (count == 0) return CJS_OK;
    pthread_mutex_lock(&s->lock);
    p->slot_rows[p->fill_index] = count;
    p->slot_filled[p->fill_index] = 1;
    p->fill_index = (p->fill_index + 1) % p->ring_slots;
    pthread_cond_broadcast(&s->changed);
    int failed = s->failed;
    pthread_mutex_unlock(&s->lock);
    return failed ? CJS_ERR_IO : CJS_OK;
}

cjs_status cjs_pyramid_sync(cjs_pyramid *p) {
    writer_shared *s = &p->shared;
    if (!s->threaded) return s->failed ? CJS_ERR_IO : CJS_OK;
    pthread_mutex_lock(&s->lock);
    while (!s->failed && (ring_busy(p) || (p->aio && aio_queue_in_flight(p->aio) > 0)))
        pthread_cond_wait(&s->changed, &s->lock);
    int failed = s->failed;
    pthread_mutex_unlock(&s->lock);
    return failed ? CJS_ERR_IO : CJS_OK;
}

cjs_status cjs_pyramid_finish(cjs_pyramid *p) {
    cjs_status s = cjs_pyramid_sync(p);
    if (s != CJS_OK) return s;
    for (uint32_t i = 0; i < p->count; i++)
        if (p->levels[i].rows_pushed != p->levels[i].geometry.height) return CJS_ERR_STATE;
    return CJS_OK;
}

int32_t cjs_pyramid_errno(cjs_pyramid *p) {
    writer_lock(&p->shared);
    int32_t number = p->shared.error_number;
    writer_unlock(&p->shared);
    return number;
}
