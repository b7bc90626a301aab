/* pyramid.h: the pyramid writer's internals, shared by window.c (levels) and pipeline.c (threads). */
#ifndef CJS_PYRAMID_H
#define CJS_PYRAMID_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>

#include "cjpeg_shim.h"

#include <linux/aio_abi.h>

/* The pwrite writer fills bands of BAND_ROWS rows of a level (a tile row is TILE / BAND_ROWS bands).
 * A band buffer holds, per tile column, the band's rows of that tile: one contiguous block of the
 * tile in the file, so a band is written as `columns` writes of band_rows * tile_size * 4 bytes
 * (64 KiB for 256-pixel tiles), asynchronously (Linux AIO, O_DIRECT) when writing behind. */
enum { BANDS_MAX = 4, BAND_ROWS = 64, RING_SLOTS_MAX = 8, RING_ROWS = 16 };

typedef struct {
    uint8_t *data;          /* columns blocks of chunk_bytes, 4096-aligned, zeroed when allocated */
    struct iocb *iocbs;     /* one per column */
    struct iocb **list;
    uint32_t band;          /* the band (padded row / band_rows) it holds */
    uint32_t pending;       /* writes still in flight */
    int in_use;             /* being filled or written */
    size_t byte_count;      /* the mapping's length */
} band_buffer;

typedef struct {
    cjs_level geometry;
    size_t tile_row_bytes;     /* columns * tile bytes: one tile row, contiguous in the file */
    uint32_t rows_pushed;      /* image rows received */
    uint32_t tile_rows_done;   /* guarded by the pyramid's lock when threaded */
    int direct_fd;             /* an O_DIRECT descriptor of the same file, or -1 */
    /* mmap window: tile rows [window_first, window_first + window_count) */
    uint8_t *window;
    size_t window_delta;       /* the window's start past the page boundary it is mapped from */
    uint32_t window_first;
    uint32_t window_count;
    /* pwrite bands */
    band_buffer bands[BANDS_MAX];
    int filling;               /* the buffer being filled, or -1 */
    uint32_t last_band;        /* the last band holding image rows */
    uint32_t bands_done;       /* every band with image rows below this one is written */
    uint32_t done_mask;        /* bit i: band bands_done + i written (out of order) */
    /* the shrink into the next level: an even row waiting for its partner */
    uint8_t *pending;
    int has_pending;
    uint8_t *shrunk;
} level_writer;

struct cjs_pyramid {
    level_writer *levels;
    uint32_t count;
    uint32_t tile_size;
    size_t tile_bytes;
    uint32_t band_rows;
    size_t chunk_bytes;    /* one tile's rows of one band */
    int band_count;        /* band buffers per level */
    int kind;
    int threaded;
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
    /* threads */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t worker;
    pthread_t reaper;
    uint32_t *progress;
    int worker_running;
    int reaper_running;
    int stopping;
    /* asynchronous writes: a Linux AIO context, reaped by the reaper thread */
    aio_context_t aio;
    int has_aio;
    uint32_t io_in_flight; /* writes submitted and not yet reaped */
};

/* window.c */
void cjs_mark_complete(cjs_pyramid *p, uint32_t level, uint32_t tile_rows);
cjs_status cjs_level_push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row);
cjs_status cjs_fail_io(cjs_pyramid *p, int error_number);
/* Reserves a level file's blocks (posix_fallocate), so a full disk fails there, not mid-write. */
cjs_status cjs_reserve(cjs_pyramid *p, level_writer *w, off_t offset, off_t length);
void cjs_lock(cjs_pyramid *p);
void cjs_unlock(cjs_pyramid *p);

/* bands.c (lock held when threaded) */
/* One write of a band's tile block finished: `error` is 0 or an errno. Frees the buffer when its
 * last write is done and moves the level's count of complete tile rows on. */
void cjs_chunk_written(cjs_pyramid *p, uint32_t level, int buffer, int error);
/* A synchronous write of one block (O_DIRECT where possible, else through the page cache). */
int cjs_write_block(level_writer *w, const uint8_t *data, size_t length, off_t offset);
/* The pwrite writer's row: scatter into the level's band, write the band out when it is full. */
cjs_status cjs_band_push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row, int last);
cjs_status cjs_bands_init(cjs_pyramid *p, uint32_t index);
void cjs_bands_free(level_writer *w);

/* pipeline.c */
cjs_status cjs_pipeline_start(cjs_pyramid *p);
void cjs_pipeline_stop(cjs_pyramid *p);

#endif
