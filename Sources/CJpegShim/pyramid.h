/* pyramid.h: the pyramid writer's internals, shared by window.c (levels) and pipeline.c (threads). */
#ifndef CJS_PYRAMID_H
#define CJS_PYRAMID_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include "cjpeg_shim.h"

typedef struct {
    cjs_level geometry;
    size_t tile_row_bytes;     /* columns * tile bytes: one tile row, contiguous in the file */
    uint32_t rows_pushed;      /* image rows received */
    uint32_t tile_rows_done;   /* guarded by the pyramid's lock when threaded */
    int direct_fd;             /* an O_DIRECT descriptor of the same file, or -1 */
    /* mmap window: tile rows [window_first, window_first + window_count) */
    uint8_t *window;
    uint32_t window_first;
    uint32_t window_count;
    /* pwrite strips: one tile row each; two when threaded (one filling, one being written) */
    uint8_t *strips[2];
    int strip_busy[2];
    int current;
    /* the shrink into the next level: an even row waiting for its partner */
    uint8_t *pending;
    int has_pending;
    uint8_t *shrunk;
} level_writer;

typedef struct {
    uint32_t level;
    uint32_t tile_row;
    int strip;
} io_job;

enum { RING_SLOTS_MAX = 8, RING_ROWS = 32 };

struct cjs_pyramid {
    level_writer *levels;
    uint32_t count;
    uint32_t tile_size;
    size_t tile_bytes;
    int kind;
    int threaded;
    int double_strips;     /* threaded with an I/O thread: two strips per level */
    int ring_slots;
    int failed;
    int error_number;
    /* rows lent to the decoder: a ring of slots when threaded, one slot otherwise */
    uint8_t *slots[RING_SLOTS_MAX];
    uint32_t slot_rows[RING_SLOTS_MAX];
    int slot_filled[RING_SLOTS_MAX];
    int fill_index;
    int work_index;
    size_t slot_stride;
    /* threads and their queue */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t worker;
    pthread_t writer;
    uint32_t *progress;
    int worker_running;
    int writer_running;
    int stopping;
    io_job *jobs;
    uint32_t job_capacity;
    uint32_t job_head;
    uint32_t job_count;
    uint32_t io_in_flight;
};

/* window.c */
void cjs_mark_complete(cjs_pyramid *p, uint32_t level, uint32_t tile_rows);
cjs_status cjs_level_push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row);
cjs_status cjs_write_strip(cjs_pyramid *p, level_writer *w, int strip, uint32_t tile_row);
cjs_status cjs_fail_io(cjs_pyramid *p, int error_number);

/* pipeline.c */
cjs_status cjs_pipeline_start(cjs_pyramid *p);
void cjs_pipeline_stop(cjs_pyramid *p);
/* Queues a complete strip for the I/O thread and returns the level's other strip to fill. */
cjs_status cjs_pipeline_hand_over(cjs_pyramid *p, uint32_t level, uint32_t tile_row);

#endif
