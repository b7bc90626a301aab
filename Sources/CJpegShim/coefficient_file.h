/*
 * coefficient_file.h: the state of the file strategy (coefficient_file.c), shared with its I/O
 * (coefficient_io.c: the sparse row format, reads and writes, the write-behind thread). Calls run
 * one way: coefficient_file.c -> coefficient_io.c.
 */
#ifndef CJS_COEFFICIENT_FILE_H
#define CJS_COEFFICIENT_FILE_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <jpeglib.h>

typedef struct cjs_block_array cjs_block_array;
typedef struct cjs_write_job cjs_write_job;

/*
 * One virtual block array: `row_count` rows of `blocks_per_row` blocks, stored at `offset` in the
 * file, row after row. In memory: `window_rows` rows starting at `window_start`, each in a buffer of
 * its own (`rows[i]` holds row window_start + i), so moving the window keeps the rows both windows
 * share by moving pointers, not blocks. The array owns 2 * window_rows buffers: those not in the
 * window are free (`free_rows`) or on their way to the file in a write job.
 */
struct cjs_block_array {
    cjs_block_array *next;
    JDIMENSION blocks_per_row, row_count, max_access;
    boolean pre_zero;
    size_t row_bytes;
    off_t offset;
    JDIMENSION window_rows;
    JDIMENSION window_start;
    int window_valid;
    JBLOCKROW *rows;
    JBLOCKROW *spare;      /* the next window's pointers, built while moving */
    JBLOCKROW *free_rows;  /* under the store's lock */
    JDIMENSION free_count;
    JBLOCK *memory;        /* 2 * window_rows * row_bytes, owned */
    JDIMENSION dirty_start, dirty_end; /* rows changed since written to the file */
    /* Rows from here on have never been written: they read as zeros (pre_zero) and are not on disk. */
    JDIMENSION first_undefined;
    /* Per row, the bytes its slot holds: 0 never written, row_bytes raw, else encoded. Under the lock. */
    uint32_t *lengths;
    /*
     * The read window: for read-only accesses outside the window above (the output pass, which in
     * buffered-image mode follows the last scan's input a few rows behind). Rows [read_start,
     * read_end) are a clean copy of the file; a write to any of them drops it.
     */
    JBLOCKROW *read_rows;
    JBLOCK *read_memory;
    JDIMENSION read_start, read_end;
};

/* Rows on their way to the file; the buffers return to the array's free list once written. */
struct cjs_write_job {
    cjs_write_job *next;
    cjs_block_array *array;
    JDIMENSION first_row, count;
    JBLOCKROW buffers[];
};

typedef struct {
    /** The temporary file, owned: closed when the store is destroyed. */
    int fd;
    cjs_block_array *arrays;
    /** Bytes the arrays take in the file. */
    unsigned long long file_bytes;
    /** Bytes of block rows held in memory (every window). */
    size_t window_bytes;
    /** Memory asked for each array's window (0: the default, 1 MiB). */
    size_t window_limit;
    /*
     * Write-behind: rows leaving a window are written by a thread of their own while the decoder goes
     * on (copying into the page cache costs about as much as entropy decoding a progressive scan).
     * `lock` guards the queue, `error`, and every array's pool of free row buffers.
     */
    pthread_t writer;
    int writer_started;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    cjs_write_job *head, *tail; /* FIFO; the head is being written */
    int stopping;
    int error;                  /* the first errno a write behind failed with */
    /* A row's encoding, one for the decoder's thread and one for the writer's (scratch_bytes each). */
    unsigned char *scratch, *writer_scratch;
    size_t scratch_bytes;
} coefficient_file;

/* Writes `count` rows starting at `first` from `rows`, each encoded through `scratch` (row_bytes
   long): 0, or an errno. Their lengths are recorded under the lock. */
int coefficient_io_write(coefficient_file *c, cjs_block_array *a, JDIMENSION first, JDIMENSION count,
                         JBLOCKROW *rows, unsigned char *scratch);
/* Reads `count` rows starting at `first` into `rows`, through `scratch`: 0, or an errno. No write of
   these rows may be running. */
int coefficient_io_read(coefficient_file *c, cjs_block_array *a, JDIMENSION first, JDIMENSION count,
                        JBLOCKROW *rows, unsigned char *scratch);
/* Whether a write of rows overlapping [first, end) of `a` is queued or running. The lock held. */
int coefficient_io_writing(const coefficient_file *c, const cjs_block_array *a, JDIMENSION first, JDIMENSION end);
/* Sends rows [first, end) (their buffers go with them) to the file: queued for the write-behind
   thread, or written now when there is none. 0 or an errno. */
int coefficient_io_write_behind(coefficient_file *c, cjs_block_array *a, JDIMENSION first, JDIMENSION end,
                                JBLOCKROW *buffers);
/* Starts the write-behind thread (nothing when it cannot be started: rows are then written inline). */
void coefficient_io_start(coefficient_file *c);
/* Stops the thread; what is queued is dropped. */
void coefficient_io_stop(coefficient_file *c);

#endif
