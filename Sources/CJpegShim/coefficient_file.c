/* coefficient_file.c: the file strategy: libjpeg's virtual block arrays in a temporary file, a window
   of rows of each in memory (rows leaving it are written behind by coefficient_io.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coefficient_file.h"
#include "coefficients.h"
#include "errors.h"

/* Default memory for one array's window; never less than twice the rows libjpeg accesses at once. */
#define DEFAULT_WINDOW_BYTES ((size_t)1 << 20)
/* Rows in a window at most. */
#define MAX_WINDOW_ROWS 512

struct coefficient_store {
    coefficient_file file;
};

static void fail_io(j_common_ptr cinfo, int writing, int number) {
    cjs_error_io(cinfo, writing ? "cannot write the coefficient file" : "cannot read the coefficient file",
                 number);
}

/* Fails the decode (on the decoder's thread) when a write behind failed. The lock held. */
static void check_writes(j_common_ptr cinfo, coefficient_file *c) {
    if (!c->error) return;
    int error = c->error;
    pthread_mutex_unlock(&c->lock);
    fail_io(cinfo, 1, error);
}

/* Reads rows [first, end) into `rows` once no write of them is queued or running (on the decoder's
   thread: a failed write behind fails the decode here). */
static void read_current(j_common_ptr cinfo, coefficient_file *c, cjs_block_array *a, JDIMENSION first,
                         JDIMENSION end, JBLOCKROW *rows) {
    pthread_mutex_lock(&c->lock);
    while (coefficient_io_writing(c, a, first, end)) pthread_cond_wait(&c->changed, &c->lock);
    check_writes(cinfo, c);
    pthread_mutex_unlock(&c->lock);
    int error = coefficient_io_read(c, a, first, end - first, rows, c->scratch);
    if (error) fail_io(cinfo, 0, error);
}

/* Loads rows [first, end) of the window from the file, those that were ever written. */
static void load(j_common_ptr cinfo, coefficient_file *c, cjs_block_array *a, JDIMENSION first, JDIMENSION end) {
    if (end > a->first_undefined) end = a->first_undefined;
    if (first >= end) return;
    read_current(cinfo, c, a, first, end, a->rows + (first - a->window_start));
}

/* Hands the rows of [first, last) leaving the window to the file (dirty ones) or the free list. */
static void leave(j_common_ptr cinfo, coefficient_file *c, cjs_block_array *a, JDIMENSION first, JDIMENSION last) {
    if (first >= last) return;
    JDIMENSION dirty_first = a->dirty_start > first ? a->dirty_start : first;
    JDIMENSION dirty_last = a->dirty_end < last ? a->dirty_end : last;
    if (dirty_first >= dirty_last) dirty_first = dirty_last = first;
    int error = coefficient_io_write_behind(c, a, dirty_first, dirty_last, a->rows + (dirty_first - a->window_start));
    if (error) fail_io(cinfo, 1, error);
    pthread_mutex_lock(&c->lock);
    for (JDIMENSION row = first; row < last; row++)
        if (row < dirty_first || row >= dirty_last) a->free_rows[a->free_count++] = a->rows[row - a->window_start];
    pthread_mutex_unlock(&c->lock);
}

/*
 * Moves the window to hold rows [start, end): forward, it starts at `start` (libjpeg walks the
 * arrays top to bottom, scan after scan); backward, it ends at `end`. Rows both windows hold stay;
 * changed rows that leave are written behind.
 */
static void move_window(j_common_ptr cinfo, coefficient_file *c, cjs_block_array *a, JDIMENSION start,
                        JDIMENSION end) {
    JDIMENSION size = a->window_rows;
    JDIMENSION target;
    if (!a->window_valid || start >= a->window_start) target = start;
    else target = end > size ? end - size : 0;
    if (target + size > a->row_count) target = a->row_count - size;
    /* Rows [keep_start, keep_end) are in both windows. */
    JDIMENSION keep_start = target, keep_end = target;
    if (a->window_valid) {
        JDIMENSION old_end = a->window_start + size;
        keep_start = a->window_start > target ? a->window_start : target;
        keep_end = old_end < target + size ? old_end : target + size;
        if (keep_start >= keep_end) keep_start = keep_end = target;
        /* Leaving: [window_start, keep_start) and [keep_end, old end); dirty ones are written behind. */
        if (keep_start == keep_end) {
            leave(cinfo, c, a, a->window_start, old_end);
        } else {
            leave(cinfo, c, a, a->window_start, keep_start);
            leave(cinfo, c, a, keep_end, old_end);
        }
        /* What stays dirty: the kept part of the dirty rows. */
        JDIMENSION dirty_first = a->dirty_start > keep_start ? a->dirty_start : keep_start;
        JDIMENSION dirty_last = a->dirty_end < keep_end ? a->dirty_end : keep_end;
        if (dirty_first < dirty_last) {
            a->dirty_start = dirty_first;
            a->dirty_end = dirty_last;
        } else {
            a->dirty_start = a->dirty_end = 0;
        }
    }
    /* The new window: kept rows keep their buffers, the others take free ones. */
    JDIMENSION needed = size - (keep_end - keep_start);
    pthread_mutex_lock(&c->lock);
    while (a->free_count < needed) pthread_cond_wait(&c->changed, &c->lock);
    for (JDIMENSION i = 0; i < size; i++) {
        JDIMENSION row = target + i;
        a->spare[i] = (row >= keep_start && row < keep_end) ? a->rows[row - a->window_start]
                                                            : a->free_rows[--a->free_count];
    }
    pthread_mutex_unlock(&c->lock);
    JBLOCKROW *swap = a->rows;
    a->rows = a->spare;
    a->spare = swap;
    a->window_start = target;
    a->window_valid = 1;
    load(cinfo, c, a, target, keep_start);
    load(cinfo, c, a, keep_end, target + size);
}

static jvirt_barray_ptr request(coefficient_store *s, j_common_ptr cinfo, boolean pre_zero, JDIMENSION blocks_per_row,
                                JDIMENSION row_count, JDIMENSION max_access) {
    cjs_block_array *a = calloc(1, sizeof *a);
    if (!a) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 10);
    a->next = s->file.arrays;
    s->file.arrays = a;
    a->blocks_per_row = blocks_per_row;
    a->row_count = row_count;
    a->max_access = max_access;
    a->pre_zero = pre_zero;
    return (jvirt_barray_ptr)(void *)a;
}

/* The window's and the read window's memory of one array. */
static void realize_array(j_common_ptr cinfo, coefficient_file *c, cjs_block_array *a) {
    a->row_bytes = (size_t)a->blocks_per_row * sizeof(JBLOCK);
    unsigned long long bytes = (unsigned long long)a->row_bytes * a->row_count;
    if (a->row_bytes == 0 || a->row_count == 0 || a->max_access > MAX_WINDOW_ROWS / 2)
        ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    a->offset = (off_t)c->file_bytes;
    c->file_bytes += bytes;
    size_t rows = (c->window_limit ? c->window_limit : DEFAULT_WINDOW_BYTES) / a->row_bytes;
    if (rows < 2 * (size_t)a->max_access) rows = 2 * (size_t)a->max_access;
    if (rows > MAX_WINDOW_ROWS) rows = MAX_WINDOW_ROWS;
    if (rows > a->row_count) rows = a->row_count;
    a->window_rows = (JDIMENSION)rows;
    a->rows = malloc(rows * sizeof(JBLOCKROW));
    a->spare = malloc(rows * sizeof(JBLOCKROW));
    a->free_rows = malloc(2 * rows * sizeof(JBLOCKROW));
    a->memory = malloc(2 * rows * a->row_bytes);
    a->lengths = calloc(a->row_count, sizeof *a->lengths);
    a->read_rows = malloc(rows * sizeof(JBLOCKROW));
    a->read_memory = malloc(rows * a->row_bytes);
    if (!a->rows || !a->spare || !a->free_rows || !a->memory || !a->lengths || !a->read_rows || !a->read_memory)
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 11);
    for (size_t i = 0; i < rows; i++) a->read_rows[i] = (JBLOCKROW)((char *)a->read_memory + i * a->row_bytes);
    if (a->row_bytes > c->scratch_bytes) c->scratch_bytes = a->row_bytes;
    for (size_t i = 0; i < 2 * rows; i++) a->free_rows[i] = (JBLOCKROW)((char *)a->memory + i * a->row_bytes);
    a->free_count = (JDIMENSION)(2 * rows);
    c->window_bytes += 3 * rows * a->row_bytes;
}

static void realize(coefficient_store *s, j_common_ptr cinfo) {
    coefficient_file *c = &s->file;
    for (cjs_block_array *a = c->arrays; a; a = a->next)
        if (!a->memory) realize_array(cinfo, c, a);
    free(c->scratch);
    free(c->writer_scratch);
    c->scratch = malloc(c->scratch_bytes);
    c->writer_scratch = malloc(c->scratch_bytes);
    if (!c->scratch || !c->writer_scratch) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 12);
    /* Without the thread (none could be started) rows are written when they leave the window. */
    coefficient_io_start(c);
}

/* Writes the window's changed rows within [first, end) to the file now; they stay in the window. */
static void write_through(j_common_ptr cinfo, coefficient_file *c, cjs_block_array *a, JDIMENSION first,
                          JDIMENSION end) {
    if (!a->window_valid || a->dirty_start >= a->dirty_end) return;
    if (a->dirty_start >= end || first >= a->dirty_end) return;
    int error = coefficient_io_write(c, a, a->dirty_start, a->dirty_end - a->dirty_start,
                                     a->rows + (a->dirty_start - a->window_start), c->scratch);
    if (error) fail_io(cinfo, 1, error);
    a->dirty_start = a->dirty_end = 0;
}

/*
 * A read-only access outside the window: served from the read window, moved (forward: it starts at
 * `start`; backward: it ends at `end`) and loaded when it does not hold the rows. Its copy stops
 * before the window's first row when the access does, so that the input's writes there do not drop
 * it; an access that straddles the window first has the window's changed rows written through.
 */
static JBLOCKARRAY read_only_access(j_common_ptr cinfo, coefficient_file *c, cjs_block_array *a, JDIMENSION start,
                                    JDIMENSION end) {
    if (start >= a->read_start && end <= a->read_end) return a->read_rows + (start - a->read_start);
    JDIMENSION size = a->window_rows;
    JDIMENSION target = start >= a->read_start ? start : (end > size ? end - size : 0);
    if (target + size > a->row_count) target = a->row_count - size;
    JDIMENSION limit = target + size;
    if (a->window_valid && a->window_start >= end && a->window_start < limit) limit = a->window_start;
    write_through(cinfo, c, a, target, limit);
    a->read_start = a->read_end = 0;
    read_current(cinfo, c, a, target, limit, a->read_rows);
    a->read_start = target;
    a->read_end = limit;
    return a->read_rows + (start - target);
}

/* As jmemmgr.c: rows never written are zeroed when first accessed (pre_zero arrays). */
static void define_rows(j_common_ptr cinfo, cjs_block_array *a, JDIMENSION start, JDIMENSION end, boolean writable) {
    if (a->first_undefined >= end) return;
    JDIMENSION undefined = a->first_undefined;
    if (undefined < start) {
        if (writable) ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
        undefined = start;
    }
    if (writable) a->first_undefined = end;
    if (a->pre_zero) {
        for (JDIMENSION row = undefined; row < end; row++) memset(a->rows[row - a->window_start], 0, a->row_bytes);
    } else if (!writable) {
        ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    }
}

static JBLOCKARRAY access_array(coefficient_store *s, j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start,
                          JDIMENSION count, boolean writable) {
    coefficient_file *c = &s->file;
    cjs_block_array *a = (cjs_block_array *)(void *)ptr;
    JDIMENSION end = start + count;
    if (!a->memory || count > a->max_access || end > a->row_count || end < start)
        ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    if (writable) {
        if (start < a->read_end && a->read_start < end) a->read_start = a->read_end = 0; /* the copy is stale */
    } else if (!(a->window_valid && start >= a->window_start && end <= a->window_start + a->window_rows)) {
        return read_only_access(cinfo, c, a, start, end);
    }
    if (!a->window_valid || start < a->window_start || end > a->window_start + a->window_rows)
        move_window(cinfo, c, a, start, end);
    define_rows(cinfo, a, start, end, writable);
    if (writable) {
        if (a->dirty_start >= a->dirty_end) {
            a->dirty_start = start;
            a->dirty_end = end;
        } else {
            if (start < a->dirty_start) a->dirty_start = start;
            if (end > a->dirty_end) a->dirty_end = end;
        }
    }
    return a->rows + (start - a->window_start);
}

static unsigned long long file_bytes(const coefficient_store *s) { return s->file.file_bytes; }

static void destroy(coefficient_store *s) {
    coefficient_file *c = &s->file;
    coefficient_io_stop(c); /* what is queued is dropped: nobody will read it */
    while (c->arrays) {
        cjs_block_array *a = c->arrays;
        c->arrays = a->next;
        free(a->rows);
        free(a->spare);
        free(a->free_rows);
        free(a->memory);
        free(a->lengths);
        free(a->read_rows);
        free(a->read_memory);
        free(a);
    }
    free(c->scratch);
    free(c->writer_scratch);
    if (c->fd >= 0) close(c->fd);
    pthread_cond_destroy(&c->changed);
    pthread_mutex_destroy(&c->lock);
    free(s);
}

const coefficient_store_methods coefficient_file_methods = {
    .request = request, .realize = realize, .access = access_array, .file_bytes = file_bytes, .destroy = destroy,
};

coefficient_store *coefficient_file_create(int fd, size_t window_bytes) {
    coefficient_store *s = calloc(1, sizeof *s);
    if (!s || pthread_mutex_init(&s->file.lock, NULL) != 0) {
        free(s);
        close(fd);
        return NULL;
    }
    if (pthread_cond_init(&s->file.changed, NULL) != 0) {
        pthread_mutex_destroy(&s->file.lock);
        free(s);
        close(fd);
        return NULL;
    }
    s->file.fd = fd;
    s->file.window_limit = window_bytes;
    return s;
}
