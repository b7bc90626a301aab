/*
 * writer.h: the level writer interface. The pyramid (pyramid.c) owns one writer per level and
 * hands it that level's rows, top to bottom; a writer turns them into tiles in the level's file
 * and stores its count of complete tile rows into the level's progress entry. Each strategy lives
 * in its own file (band_writer.c, window_writer.c, tiff_level_encoder.c, turned_tiles.c) with its own state struct, behind one table of
 * methods, as libjpeg's jpeg_memory_mgr and SQLite's sqlite3_io_methods are. Writers never call
 * the pyramid: what they share with it is the writer_shared object below, which the pyramid owns.
 */
#ifndef CJS_WRITER_H
#define CJS_WRITER_H

#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "cjpeg_shim.h"

typedef struct aio_queue aio_queue;

/*
 * State shared by the pyramid, its writers and the AIO queue: one lock and one condition (used
 * only when `threaded`), and the first failure. Owned by the pyramid; it outlives every writer.
 */
typedef struct {
    int threaded;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int stopping;     /* the pyramid is being destroyed: waits give up */
    int failed;       /* guarded by lock when threaded */
    int error_number; /* the first failure's errno */
} writer_shared;

void writer_lock(writer_shared *s);
void writer_unlock(writer_shared *s);
/* Records a failure (the first errno is kept) and wakes every waiter. Takes the lock. */
cjs_status writer_fail(writer_shared *s, int error_number);
/* As writer_fail, with the lock already held. */
void writer_fail_locked(writer_shared *s, int error_number);
/* Reserves a file range's blocks (posix_fallocate), so a full disk fails here as ENOSPC rather than
 * as a SIGBUS in a mapping or in the middle of a band's writes. */
cjs_status writer_reserve(writer_shared *s, int fd, off_t offset, off_t length);
/* Publishes a level's count of complete tile rows (release order). */
void writer_publish_progress(uint32_t *entry, uint32_t tile_rows);

/* What a writer is made from. */
typedef struct {
    cjs_level level;        /* the level's geometry and file */
    uint32_t index;         /* the level's number (0 is full size) */
    uint32_t tile_size;
    size_t tile_bytes;
    const cjs_writer_config *config;
    uint32_t *progress;     /* this level's progress entry, or NULL */
    writer_shared *shared;
    aio_queue *aio;         /* the band writer's asynchronous writes, or NULL */
} writer_setup;

typedef struct level_writer level_writer; /* each strategy defines its own */

typedef struct {
    /* Creates the writer of one level; on CJS_ERR_IO the errno is in shared->error_number. */
    cjs_status (*create)(const writer_setup *setup, level_writer **out);
    /* Takes the level's next row; `index` is its row in the level, `last` marks the level's last row. */
    cjs_status (*push_row)(level_writer *w, const uint8_t *row, uint32_t index, int last);
    /* Frees the writer; every thread that could touch it has stopped. */
    void (*destroy)(level_writer *w);
} writer_methods;

extern const writer_methods band_writer_methods;
extern const writer_methods window_writer_methods;
extern const writer_methods tiff_level_writer_methods;
extern const writer_methods turned_tiles_writer_methods;

#endif
