/* coefficients.c: libjpeg's virtual block arrays in a temporary file, a window of rows in memory. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coefficients.h"
#include "errors.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Default memory for one array's window; never less than twice the rows libjpeg accesses at once. */
#define DEFAULT_WINDOW_BYTES ((size_t)1 << 20)
/* Rows in a window at most. */
#define MAX_WINDOW_ROWS 512

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

/*
 * Rows are stored sparsely in their slots (row_bytes apart, so the file's layout never changes): per
 * block, a 64-bit mask of its non-zero coefficients, then those coefficients. Most coefficients of a
 * photo are zero, and all but the DC are before the later scans, so a slot is mostly never written:
 * fewer pages to copy, and fewer fresh pages (the first touch of a page is what costs here). A row
 * that would not fit is stored raw.
 */
static inline uint64_t nonzero_mask(const JCOEF *coefficients) {
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    uint64_t mask = 0;
    for (int i = 0; i < 4; i++) {
        __m128i low = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(const void *)(coefficients + 16 * i)), zero);
        __m128i high = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(const void *)(coefficients + 16 * i + 8)), zero);
        unsigned zeros = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(low, high));
        mask |= (uint64_t)(~zeros & 0xFFFFu) << (16 * i);
    }
    return mask;
#else
    uint64_t mask = 0;
    for (int k = 0; k < DCTSIZE2; k++)
        if (coefficients[k]) mask |= (uint64_t)1 << k;
    return mask;
#endif
}

/* Encodes a row into `out` (row_bytes long); returns its length, or row_bytes when it is stored raw. */
static size_t encode_row(const cjs_block_array *a, JBLOCKROW row, unsigned char *out) {
    unsigned char *p = out, *limit = out + a->row_bytes;
    for (JDIMENSION b = 0; b < a->blocks_per_row; b++) {
        const JCOEF *coefficients = row[b];
        uint64_t mask = nonzero_mask(coefficients);
        size_t need = 8 + 2 * (size_t)__builtin_popcountll(mask);
        if (need >= (size_t)(limit - p)) return a->row_bytes;
        memcpy(p, &mask, 8);
        p += 8;
        while (mask) {
            memcpy(p, &coefficients[__builtin_ctzll(mask)], 2);
            p += 2;
            mask &= mask - 1;
        }
    }
    return (size_t)(p - out);
}

/* Decodes `length` bytes of an encoded row into `row`: 0, or EIO when they do not make a row. */
static int decode_row(const cjs_block_array *a, const unsigned char *in, size_t length, JBLOCKROW row) {
    const unsigned char *p = in, *end = in + length;
    memset(row, 0, a->row_bytes);
    for (JDIMENSION b = 0; b < a->blocks_per_row; b++) {
        uint64_t mask;
        if (end - p < 8) return EIO;
        memcpy(&mask, p, 8);
        p += 8;
        if ((size_t)(end - p) < 2 * (size_t)__builtin_popcountll(mask)) return EIO;
        JCOEF *coefficients = row[b];
        while (mask) {
            memcpy(&coefficients[__builtin_ctzll(mask)], p, 2);
            p += 2;
            mask &= mask - 1;
        }
    }
    return p == end ? 0 : EIO;
}

/* pread or pwrite of exactly `count` bytes at `position`: 0, or an errno. */
static int transfer(int fd, void *bytes, size_t count, off_t position, int writing) {
    char *p = bytes;
    while (count > 0) {
        ssize_t done = writing ? pwrite(fd, p, count, position) : pread(fd, p, count, position);
        if (done < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (done == 0) return writing ? ENOSPC : EIO; /* a file shorter than what was written to it */
        p += done;
        count -= (size_t)done;
        position += done;
    }
    return 0;
}

static off_t slot(const cjs_block_array *a, JDIMENSION row) {
    return a->offset + (off_t)row * (off_t)a->row_bytes;
}

/*
 * Writes `count` rows starting at `first` from `rows`, each encoded through `scratch` (row_bytes
 * long): 0, or an errno. Their lengths are recorded under the lock.
 */
static int write_rows(cjs_coefficients *c, cjs_block_array *a, JDIMENSION first, JDIMENSION count, JBLOCKROW *rows,
                      unsigned char *scratch) {
    for (JDIMENSION i = 0; i < count; i++) {
        size_t length = encode_row(a, rows[i], scratch);
        int error = transfer(c->fd, length == a->row_bytes ? (void *)rows[i] : scratch, length, slot(a, first + i), 1);
        if (error) return error;
        pthread_mutex_lock(&c->lock);
        a->lengths[first + i] = (uint32_t)length;
        pthread_mutex_unlock(&c->lock);
    }
    return 0;
}

/* Reads `count` rows starting at `first` into `rows`, through `scratch`: 0, or an errno. No write of
 * these rows may be running. */
static int read_rows(cjs_coefficients *c, cjs_block_array *a, JDIMENSION first, JDIMENSION count, JBLOCKROW *rows,
                     unsigned char *scratch) {
    for (JDIMENSION i = 0; i < count; i++) {
        pthread_mutex_lock(&c->lock);
        size_t length = a->lengths[first + i];
        pthread_mutex_unlock(&c->lock);
        int error;
        if (length == 0) {
            memset(rows[i], 0, a->row_bytes);
            error = 0;
        } else if (length == a->row_bytes) {
            error = transfer(c->fd, rows[i], length, slot(a, first + i), 0);
        } else {
            error = transfer(c->fd, scratch, length, slot(a, first + i), 0);
            if (!error) error = decode_row(a, scratch, length, rows[i]);
        }
        if (error) return error;
    }
    return 0;
}

static void fail_io(j_common_ptr cinfo, int writing, int number) {
    cjs_error_io(cinfo, writing ? "cannot write the coefficient file" : "cannot read the coefficient file",
                 number);
}

/* The write-behind thread: writes jobs in order, hands their buffers back, never calls libjpeg. */
static void *write_behind(void *argument) {
    cjs_coefficients *c = argument;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->head && !c->stopping) pthread_cond_wait(&c->changed, &c->lock);
        if (!c->head) break;
        cjs_write_job *job = c->head;
        int skip = c->error || c->stopping;
        pthread_mutex_unlock(&c->lock);
        int error = skip ? 0 : write_rows(c, job->array, job->first_row, job->count, job->buffers, c->writer_scratch);
        pthread_mutex_lock(&c->lock);
        if (error && !c->error) c->error = error;
        cjs_block_array *a = job->array;
        for (JDIMENSION i = 0; i < job->count; i++) a->free_rows[a->free_count++] = job->buffers[i];
        c->head = job->next;
        if (!c->head) c->tail = NULL;
        free(job);
        pthread_cond_broadcast(&c->changed);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* Fails the decode (on the decoder's thread) when a write behind failed. The lock held. */
static void check_writes(j_common_ptr cinfo, cjs_coefficients *c) {
    if (!c->error) return;
    int error = c->error;
    pthread_mutex_unlock(&c->lock);
    fail_io(cinfo, 1, error);
}

/* Whether a write of rows overlapping [first, end) of `a` is queued or running. The lock held. */
static int writing_rows(const cjs_coefficients *c, const cjs_block_array *a, JDIMENSION first, JDIMENSION end) {
    for (const cjs_write_job *job = c->head; job; job = job->next)
        if (job->array == a && job->first_row < end && first < job->first_row + job->count) return 1;
    return 0;
}

/* Sends rows [first, end) of the window (dirty, leaving it) to the file; their buffers go with them. */
static void write_behind_rows(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION first,
                              JDIMENSION end, JBLOCKROW *buffers) {
    if (first >= end) return;
    JDIMENSION count = end - first;
    cjs_write_job *job = c->writer_started ? malloc(sizeof *job + count * sizeof(JBLOCKROW)) : NULL;
    if (!job) { /* no thread or no memory: write now, after any queued write of the same rows */
        pthread_mutex_lock(&c->lock);
        while (writing_rows(c, a, first, end)) pthread_cond_wait(&c->changed, &c->lock);
        pthread_mutex_unlock(&c->lock);
        int error = write_rows(c, a, first, count, buffers, c->scratch);
        if (error) fail_io(cinfo, 1, error);
        pthread_mutex_lock(&c->lock);
        for (JDIMENSION i = 0; i < count; i++) a->free_rows[a->free_count++] = buffers[i];
        pthread_mutex_unlock(&c->lock);
        return;
    }
    job->next = NULL;
    job->array = a;
    job->first_row = first;
    job->count = count;
    memcpy(job->buffers, buffers, count * sizeof(JBLOCKROW));
    pthread_mutex_lock(&c->lock);
    if (c->tail) c->tail->next = job;
    else c->head = job;
    c->tail = job;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}


/* Reads rows [first, end) into `rows` once no write of them is queued or running (on the decoder's
   thread: a failed write behind fails the decode here). */
static void read_current(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION first,
                         JDIMENSION end, JBLOCKROW *rows) {
    pthread_mutex_lock(&c->lock);
    while (writing_rows(c, a, first, end)) pthread_cond_wait(&c->changed, &c->lock);
    check_writes(cinfo, c);
    pthread_mutex_unlock(&c->lock);
    int error = read_rows(c, a, first, end - first, rows, c->scratch);
    if (error) fail_io(cinfo, 0, error);
}

/* Loads rows [first, end) of the window from the file, those that were ever written. */
static void load(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION first, JDIMENSION end) {
    if (end > a->first_undefined) end = a->first_undefined;
    if (first >= end) return;
    read_current(cinfo, c, a, first, end, a->rows + (first - a->window_start));
}

/*
 * Moves the window to hold rows [start, end): forward, it starts at `start` (libjpeg walks the
 * arrays top to bottom, scan after scan); backward, it ends at `end`. Rows both windows hold stay;
 * changed rows that leave are written behind.
 */
static void move_window(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION start,
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
    }
    if (a->window_valid) {
        /* Leaving: [window_start, keep_start) and [keep_end, old end); dirty ones are written behind. */
        JDIMENSION runs[2][2] = {{a->window_start, keep_start}, {keep_end, a->window_start + size}};
        if (keep_start == keep_end) { /* nothing kept: the whole old window leaves */
            runs[0][1] = a->window_start + size;
            runs[1][0] = runs[1][1] = 0;
        }
        for (int r = 0; r < 2; r++) {
            JDIMENSION first = runs[r][0], last = runs[r][1];
            if (first >= last) continue;
            JDIMENSION dirty_first = a->dirty_start > first ? a->dirty_start : first;
            JDIMENSION dirty_last = a->dirty_end < last ? a->dirty_end : last;
            if (dirty_first >= dirty_last) dirty_first = dirty_last = first;
            write_behind_rows(cinfo, c, a, dirty_first, dirty_last, a->rows + (dirty_first - a->window_start));
            pthread_mutex_lock(&c->lock);
            for (JDIMENSION row = first; row < last; row++)
                if (row < dirty_first || row >= dirty_last) a->free_rows[a->free_count++] = a->rows[row - a->window_start];
            pthread_mutex_unlock(&c->lock);
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

static jvirt_barray_ptr request_barray(j_common_ptr cinfo, int pool_id, boolean pre_zero, JDIMENSION blocks_per_row,
                                       JDIMENSION row_count, JDIMENSION max_access) {
    cjs_coefficients *c = cjs_coefficients_of(cinfo);
    if (!c->active) return c->request_barray(cinfo, pool_id, pre_zero, blocks_per_row, row_count, max_access);
    if (pool_id != JPOOL_IMAGE) ERREXIT1(cinfo, JERR_BAD_POOL_ID, pool_id);
    cjs_block_array *a = calloc(1, sizeof *a);
    if (!a) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 10);
    a->next = c->arrays;
    c->arrays = a;
    a->blocks_per_row = blocks_per_row;
    a->row_count = row_count;
    a->max_access = max_access;
    a->pre_zero = pre_zero;
    return (jvirt_barray_ptr)(void *)a;
}

static void realize(j_common_ptr cinfo) {
    cjs_coefficients *c = cjs_coefficients_of(cinfo);
    c->realize(cinfo); /* libjpeg's own arrays, if any */
    if (!c->active) return;
    for (cjs_block_array *a = c->arrays; a; a = a->next) {
        if (a->memory) continue;
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
    c->scratch = malloc(c->scratch_bytes);
    c->writer_scratch = malloc(c->scratch_bytes);
    if (!c->scratch || !c->writer_scratch) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 12);
    /* Without the thread (none could be started) rows are written when they leave the window. */
    if (!c->writer_started && pthread_create(&c->writer, NULL, write_behind, c) == 0) c->writer_started = 1;
}

/* Writes the window's changed rows within [first, end) to the file now; they stay in the window. */
static void write_through(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION first,
                          JDIMENSION end) {
    if (!a->window_valid || a->dirty_start >= a->dirty_end) return;
    if (a->dirty_start >= end || first >= a->dirty_end) return;
    int error = write_rows(c, a, a->dirty_start, a->dirty_end - a->dirty_start,
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
static JBLOCKARRAY read_only_access(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION start,
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

static JBLOCKARRAY access_barray(j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start, JDIMENSION count,
                                 boolean writable) {
    cjs_coefficients *c = cjs_coefficients_of(cinfo);
    if (!c->active) return c->access_barray(cinfo, ptr, start, count, writable);
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
    /* As jmemmgr.c: rows never written are zeroed when first accessed (pre_zero arrays). */
    if (a->first_undefined < end) {
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

static void free_pool(j_common_ptr cinfo, int pool_id) {
    cjs_coefficients *c = cjs_coefficients_of(cinfo);
    if (pool_id == JPOOL_IMAGE) cjs_coefficients_release(c);
    c->free_pool(cinfo, pool_id);
}

void cjs_coefficients_install(j_decompress_ptr cinfo, cjs_coefficients *c) {
    struct jpeg_memory_mgr *mem = cinfo->mem;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->changed, NULL);
    c->writer_started = 0;
    c->head = c->tail = NULL;
    c->stopping = 0;
    c->error = 0;
    c->scratch = c->writer_scratch = NULL;
    c->scratch_bytes = 0;
    c->fd = -1;
    c->active = 0;
    c->arrays = NULL;
    c->file_bytes = 0;
    c->window_bytes = 0;
    c->window_limit = 0;
    c->request_barray = mem->request_virt_barray;
    c->realize = mem->realize_virt_arrays;
    c->access_barray = mem->access_virt_barray;
    c->free_pool = mem->free_pool;
    mem->request_virt_barray = request_barray;
    mem->realize_virt_arrays = realize;
    mem->access_virt_barray = access_barray;
    mem->free_pool = free_pool;
}

void cjs_coefficients_adopt(cjs_coefficients *c, int fd, size_t window_bytes) {
    if (c->fd >= 0) close(c->fd);
    c->fd = fd;
    c->window_limit = window_bytes;
    c->active = fd >= 0;
}

void cjs_coefficients_release(cjs_coefficients *c) {
    if (c->writer_started) { /* what is queued is dropped: nobody will read it */
        pthread_mutex_lock(&c->lock);
        c->stopping = 1;
        pthread_cond_broadcast(&c->changed);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->writer, NULL);
        c->writer_started = 0;
        c->stopping = 0;
    }
    c->error = 0;
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
    c->scratch = c->writer_scratch = NULL;
    c->scratch_bytes = 0;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->active = 0;
    c->file_bytes = 0;
    c->window_bytes = 0;
}

void cjs_coefficients_destroy(cjs_coefficients *c) {
    cjs_coefficients_release(c);
    pthread_cond_destroy(&c->changed);
    pthread_mutex_destroy(&c->lock);
}

unsigned long long cjs_coefficients_needed(j_decompress_ptr cinfo) {
    if (!jpeg_has_multiple_scans(cinfo)) return 0;
    unsigned long long total = 0;
    for (int ci = 0; ci < cinfo->num_components; ci++) {
        const jpeg_component_info *comp = &cinfo->comp_info[ci];
        unsigned long long across = (comp->width_in_blocks + comp->h_samp_factor - 1) / comp->h_samp_factor;
        unsigned long long down = (comp->height_in_blocks + comp->v_samp_factor - 1) / comp->v_samp_factor;
        total += across * comp->h_samp_factor * down * comp->v_samp_factor * sizeof(JBLOCK);
    }
    return total;
}
