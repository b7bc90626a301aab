/* pipeline.c: the ring of decoded rows, the worker thread (scatter, shrink, band writes) and the
 * reaper thread (completions of the asynchronous writes). */
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* The reaper: takes the completions of the asynchronous band writes. */
static void *reaper_main(void *arg) {
    cjs_pyramid *p = arg;
    struct io_event events[64];
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stopping && p->io_in_flight == 0) pthread_cond_wait(&p->changed, &p->lock);
        if (p->io_in_flight == 0) break; /* stopping, and nothing left in flight */
        pthread_mutex_unlock(&p->lock);
        long n = syscall(SYS_io_getevents, p->aio, 1L, 64L, events, NULL);
        int error = n < 0 && errno != EINTR ? errno : 0;
        pthread_mutex_lock(&p->lock);
        for (long i = 0; i < n; i++) {
            int64_t res = (int64_t)events[i].res;
            /* data: level << 48 | band buffer << 40 | bytes (see write_band) */
            uint64_t data = events[i].data;
            int failure = res < 0 ? (int)-res : (uint64_t)res != (data & 0xffffffffffull) ? EIO : 0;
            p->io_in_flight--;
            cjs_chunk_written(p, (uint32_t)(data >> 48), (int)((data >> 40) & 0xff), failure);
        }
        if (error) {
            /* The context is unusable: fail the build; destroy's io_destroy waits for what is left. */
            if (!p->failed) p->error_number = error;
            p->failed = 1;
            pthread_cond_broadcast(&p->changed);
            break;
        }
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void *destroy_context_main(void *arg) {
    syscall(SYS_io_destroy, (aio_context_t)(uintptr_t)arg);
    return NULL;
}

/* io_destroy waits for an RCU grace period (30 ms seen here), which would land on the build's last
 * step: with nothing in flight it runs on a detached thread. With writes still in flight (a failed
 * build) it waits here, so the buffers they read are not freed under them. */
static void destroy_context(aio_context_t context, int idle) {
    pthread_t thread;
    pthread_attr_t attributes;
    if (idle && pthread_attr_init(&attributes) == 0) {
        pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&thread, &attributes, destroy_context_main, (void *)(uintptr_t)context);
        pthread_attr_destroy(&attributes);
        if (rc == 0) return;
    }
    syscall(SYS_io_destroy, context);
}

cjs_status cjs_pipeline_start(cjs_pyramid *p) {
    if (pthread_create(&p->worker, NULL, worker_main, p) != 0) return CJS_ERR_NOMEM;
    p->worker_running = 1;
    if (!p->has_aio) return CJS_OK; /* the worker writes its bands itself */
    /* Room for every block of every band buffer in flight at once. */
    long events = 0;
    for (uint32_t i = 0; i < p->count; i++) events += (long)p->levels[i].geometry.columns * p->band_count;
    p->aio = 0;
    if (syscall(SYS_io_setup, events, &p->aio) != 0) {
        p->has_aio = 0; /* no AIO here (limits, seccomp): synchronous writes on the worker */
        return CJS_OK;
    }
    if (pthread_create(&p->reaper, NULL, reaper_main, p) != 0) {
        syscall(SYS_io_destroy, p->aio);
        p->has_aio = 0;
        return CJS_OK;
    }
    p->reaper_running = 1;
    return CJS_OK;
}

void cjs_pipeline_stop(cjs_pyramid *p) {
    if (!p->threaded) return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    if (p->worker_running) pthread_join(p->worker, NULL);
    if (p->reaper_running) pthread_join(p->reaper, NULL); /* returns once nothing is in flight */
    if (p->has_aio) destroy_context(p->aio, p->io_in_flight == 0);
    p->worker_running = p->reaper_running = 0;
    p->has_aio = 0;
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
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
