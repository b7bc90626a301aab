/* aio.c: Linux AIO (io_setup, io_submit, io_getevents, io_destroy) and its reaper thread. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "aio.h"

struct aio_queue {
    writer_shared *shared;
    aio_context_t context;
    long events;          /* capacity reserved by the writers */
    int running;          /* the context exists and the reaper runs */
    int stopping;         /* guarded by the shared lock */
    uint32_t in_flight;   /* guarded by the shared lock */
    pthread_t reaper;
};

cjs_status aio_queue_create(writer_shared *shared, aio_queue **out) {
    aio_queue *q = calloc(1, sizeof *q);
    if (!q) return CJS_ERR_NOMEM;
    q->shared = shared;
    *out = q;
    return CJS_OK;
}

void aio_queue_reserve(aio_queue *q, long events) { q->events += events; }

/* Takes completions until stopped with nothing in flight, or until the context fails. */
static void *reaper_main(void *arg) {
    aio_queue *q = arg;
    writer_shared *s = q->shared;
    struct io_event events[64];
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!q->stopping && q->in_flight == 0) pthread_cond_wait(&s->changed, &s->lock);
        if (q->in_flight == 0) break; /* stopping, and nothing left in flight */
        pthread_mutex_unlock(&s->lock);
        long n = syscall(SYS_io_getevents, q->context, 1L, 64L, events, NULL);
        int error = n < 0 && errno != EINTR ? errno : 0;
        pthread_mutex_lock(&s->lock);
        for (long i = 0; i < n; i++) {
            aio_completion *c = (aio_completion *)(uintptr_t)events[i].data;
            int64_t res = (int64_t)events[i].res;
            q->in_flight--;
            c->done(c, res < 0 ? (int)-res : (size_t)res != c->expected_bytes ? EIO : 0);
        }
        if (error) {
            /* The context is unusable: fail the build; destroy's io_destroy waits for what is left. */
            writer_fail_locked(s, error);
            break;
        }
        pthread_cond_broadcast(&s->changed);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

void aio_queue_start(aio_queue *q) {
    if (q->events == 0 || syscall(SYS_io_setup, q->events, &q->context) != 0) return;
    if (pthread_create(&q->reaper, NULL, reaper_main, q) != 0) {
        syscall(SYS_io_destroy, q->context);
        return;
    }
    q->running = 1;
}

uint32_t aio_queue_submit(aio_queue *q, struct iocb **list, uint32_t count) {
    if (!q->running) return 0;
    writer_shared *s = q->shared;
    /* Counted first, so the reaper waits for them and sync sees them. */
    pthread_mutex_lock(&s->lock);
    q->in_flight += count;
    pthread_cond_broadcast(&s->changed); /* wakes the reaper */
    pthread_mutex_unlock(&s->lock);
    uint32_t submitted = 0;
    while (submitted < count) {
        long n = syscall(SYS_io_submit, q->context, (long)(count - submitted), list + submitted);
        if (n > 0) {
            submitted += (uint32_t)n;
            continue;
        }
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            sched_yield();
            continue;
        }
        break; /* refused: the caller writes the rest synchronously */
    }
    pthread_mutex_lock(&s->lock);
    q->in_flight -= count - submitted;
    pthread_mutex_unlock(&s->lock);
    return submitted;
}

uint32_t aio_queue_in_flight(const aio_queue *q) { return q->in_flight; }

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

void aio_queue_destroy(aio_queue *q) {
    if (!q) return;
    if (q->running) {
        writer_shared *s = q->shared;
        pthread_mutex_lock(&s->lock);
        q->stopping = 1;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
        pthread_join(q->reaper, NULL); /* returns once nothing is in flight, or the context failed */
        destroy_context(q->context, q->in_flight == 0);
    }
    free(q);
}
