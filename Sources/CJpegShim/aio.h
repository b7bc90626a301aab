/*
 * aio.h: all of the shim's Linux AIO. The band writer submits a full band's blocks here; a reaper
 * thread takes the completions and calls each request's completion with the shared lock held.
 */
#ifndef CJS_AIO_H
#define CJS_AIO_H

#include <linux/aio_abi.h>

#include "writer.h"

/* Embedded in whatever a write belongs to; an iocb's aio_data points to it. */
typedef struct aio_completion {
    /* Called on the reaper thread, the shared lock held: `error` is 0 or an errno (EIO for a short
     * write). */
    void (*done)(struct aio_completion *self, int error);
    size_t expected_bytes;
} aio_completion;

/* A queue that is not started yet: writers reserve their events on it before aio_queue_start. */
cjs_status aio_queue_create(writer_shared *shared, aio_queue **out);
/* Room for `events` more writes in flight at once. Before aio_queue_start only. */
void aio_queue_reserve(aio_queue *q, long events);
/* Sets up the context and the reaper. Where AIO is refused (limits, seccomp) the queue stays
 * stopped and aio_queue_submit accepts nothing: the writers write synchronously. */
void aio_queue_start(aio_queue *q);
/* Submits up to `count` writes and returns how many were accepted (the caller writes the rest
 * itself). Called without the lock. */
uint32_t aio_queue_submit(aio_queue *q, struct iocb **list, uint32_t count);
/* Writes submitted and not yet completed; the lock held. */
uint32_t aio_queue_in_flight(const aio_queue *q);
/* Waits for the writes in flight, joins the reaper and frees the queue. */
void aio_queue_destroy(aio_queue *q);

#endif
