/* pipeline.c: the ring of decoded rows, the worker thread (scatter, shrink) and the I/O thread. */
#include <stdlib.h>

#include "pyramid.h"

/* The worker: tiles each filled slot in order, then frees it. */
static void *worker_main(void *arg) {
    cjs_pyramid *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stopping && !p->slot_filled[p->work_index]) pthread_cond_wait(&p->changed, &p->lock);
        if (p->stopping) break;
        int slot = p->work_index;
        uint32_t rows = p->slot_rows[slot];
        int failed = p->failed;
        pthread_mutex_unlock(&p->lock);
        for (uint32_t i = 0; i < rows && !failed; i++)
            failed = cjs_level_push_row(p, 0, p->slots[slot] + i * p->slot_stride) != CJS_OK;
        pthread_mutex_lock(&p->lock);
        if (failed && !p->failed) { p->failed = 1; }
        p->slot_filled[slot] = 0;
        p->work_index = (slot + 1) % p->ring_slots;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* The writer: writes each queued strip, in order, and marks its tile row complete. */
static void *writer_main(void *arg) {
    cjs_pyramid *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stopping && p->job_count == 0) pthread_cond_wait(&p->changed, &p->lock);
        if (p->stopping) break;
        io_job job = p->jobs[p->job_head];
        p->job_head = (p->job_head + 1) % p->job_capacity;
        p->job_count--;
        int failed = p->failed;
        pthread_mutex_unlock(&p->lock);
        level_writer *w = &p->levels[job.level];
        cjs_status s = failed ? CJS_ERR_IO : cjs_write_strip(p, w, job.strip, job.tile_row);
        pthread_mutex_lock(&p->lock);
        if (s == CJS_OK) cjs_mark_complete(p, job.level, job.tile_row + 1);
        w->strip_busy[job.strip] = 0;
        p->io_in_flight--;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

cjs_status cjs_pipeline_start(cjs_pyramid *p) {
    p->job_capacity = 2 * p->count + 2;
    p->jobs = calloc(p->job_capacity, sizeof *p->jobs);
    if (!p->jobs) return CJS_ERR_NOMEM;
    if (pthread_create(&p->worker, NULL, worker_main, p) != 0) return CJS_ERR_NOMEM;
    p->worker_running = 1;
    if (!p->double_strips) return CJS_OK; /* the worker writes its strips itself */
    if (pthread_create(&p->writer, NULL, writer_main, p) != 0) return CJS_ERR_NOMEM;
    p->writer_running = 1;
    return CJS_OK;
}

void cjs_pipeline_stop(cjs_pyramid *p) {
    if (!p->threaded) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    if (p->worker_running) pthread_join(p->worker, NULL);
    if (p->writer_running) pthread_join(p->writer, NULL);
    p->worker_running = p->writer_running = 0;
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    free(p->jobs);
    p->jobs = NULL;
}

cjs_status cjs_pipeline_hand_over(cjs_pyramid *p, uint32_t level, uint32_t tile_row) {
    level_writer *w = &p->levels[level];
    pthread_mutex_lock(&p->lock);
    uint32_t tail = (p->job_head + p->job_count) % p->job_capacity;
    p->jobs[tail] = (io_job){level, tile_row, w->current};
    p->job_count++;
    p->io_in_flight++;
    w->strip_busy[w->current] = 1;
    w->current ^= 1;
    pthread_cond_broadcast(&p->changed);
    while (w->strip_busy[w->current] && !p->failed && !p->stopping) pthread_cond_wait(&p->changed, &p->lock);
    int failed = p->failed || p->stopping;
    pthread_mutex_unlock(&p->lock);
    return failed ? CJS_ERR_IO : CJS_OK;
}

cjs_status cjs_pyramid_acquire_rows(cjs_pyramid *p, void **rows, size_t *stride, uint32_t *capacity) {
    *stride = p->slot_stride;
    *capacity = RING_ROWS;
    if (!p->threaded) {
        *rows = p->slots[0];
        return p->failed ? CJS_ERR_IO : CJS_OK;
    }
    pthread_mutex_lock(&p->lock);
    while (p->slot_filled[p->fill_index] && !p->failed) pthread_cond_wait(&p->changed, &p->lock);
    int failed = p->failed;
    *rows = p->slots[p->fill_index];
    pthread_mutex_unlock(&p->lock);
    return failed ? CJS_ERR_IO : CJS_OK;
}

cjs_status cjs_pyramid_submit_rows(cjs_pyramid *p, uint32_t count) {
    if (count > RING_ROWS) return CJS_ERR_ARGUMENT;
    if (!p->threaded) {
        if (p->failed) return CJS_ERR_IO;
        for (uint32_t i = 0; i < count; i++) {
            cjs_status s = cjs_level_push_row(p, 0, p->slots[0] + i * p->slot_stride);
            if (s != CJS_OK) return s;
        }
        return CJS_OK;
    }
    if (count == 0) return CJS_OK;
    pthread_mutex_lock(&p->lock);
    p->slot_rows[p->fill_index] = count;
    p->slot_filled[p->fill_index] = 1;
    p->fill_index = (p->fill_index + 1) % p->ring_slots;
    pthread_cond_broadcast(&p->changed);
    int failed = p->failed;
    pthread_mutex_unlock(&p->lock);
    return failed ? CJS_ERR_IO : CJS_OK;
}

static int ring_busy(const cjs_pyramid *p) {
    for (int s = 0; s < p->ring_slots; s++)
        if (p->slot_filled[s]) return 1;
    return 0;
}

cjs_status cjs_pyramid_sync(cjs_pyramid *p) {
    if (!p->threaded) return p->failed ? CJS_ERR_IO : CJS_OK;
    pthread_mutex_lock(&p->lock);
    while (!p->failed && (ring_busy(p) || p->io_in_flight > 0)) pthread_cond_wait(&p->changed, &p->lock);
    int failed = p->failed;
    pthread_mutex_unlock(&p->lock);
    return failed ? CJS_ERR_IO : CJS_OK;
}

uint32_t cjs_pyramid_tile_rows_complete(const cjs_pyramid *p, uint32_t level) {
    if (level >= p->count) return 0;
    if (!p->threaded) return p->levels[level].tile_rows_done;
    pthread_mutex_lock((pthread_mutex_t *)&p->lock);
    uint32_t done = p->levels[level].tile_rows_done;
    pthread_mutex_unlock((pthread_mutex_t *)&p->lock);
    return done;
}
