/* coefficient_io.c: the coefficient file's rows on disk: a sparse row format, reads, writes, and the
   thread that writes rows behind while the decoder goes on. Never calls libjpeg. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coefficient_file.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

int coefficient_io_write(coefficient_file *c, cjs_block_array *a, JDIMENSION first, JDIMENSION count,
                         JBLOCKROW *rows, unsigned char *scratch) {
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

int coefficient_io_read(coefficient_file *c, cjs_block_array *a, JDIMENSION first, JDIMENSION count,
                        JBLOCKROW *rows, unsigned char *scratch) {
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

/* The write-behind thread: writes jobs in order, hands their buffers back, never calls libjpeg. */
static void *write_behind(void *argument) {
    coefficient_file *c = argument;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->head && !c->stopping) pthread_cond_wait(&c->changed, &c->lock);
        if (!c->head) break;
        cjs_write_job *job = c->head;
        int skip = c->error || c->stopping;
        pthread_mutex_unlock(&c->lock);
        int error = skip ? 0
                         : coefficient_io_write(c, job->array, job->first_row, job->count, job->buffers,
                                                c->writer_scratch);
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

int coefficient_io_writing(const coefficient_file *c, const cjs_block_array *a, JDIMENSION first, JDIMENSION end) {
    for (const cjs_write_job *job = c->head; job; job = job->next)
        if (job->array == a && job->first_row < end && first < job->first_row + job->count) return 1;
    return 0;
}

int coefficient_io_write_behind(coefficient_file *c, cjs_block_array *a, JDIMENSION first, JDIMENSION end,
                                JBLOCKROW *buffers) {
    if (first >= end) return 0;
    JDIMENSION count = end - first;
    cjs_write_job *job = c->writer_started ? malloc(sizeof *job + count * sizeof(JBLOCKROW)) : NULL;
    if (!job) { /* no thread or no memory: write now, after any queued write of the same rows */
        pthread_mutex_lock(&c->lock);
        while (coefficient_io_writing(c, a, first, end)) pthread_cond_wait(&c->changed, &c->lock);
        pthread_mutex_unlock(&c->lock);
        int error = coefficient_io_write(c, a, first, count, buffers, c->scratch);
        pthread_mutex_lock(&c->lock);
        for (JDIMENSION i = 0; i < count; i++) a->free_rows[a->free_count++] = buffers[i];
        pthread_mutex_unlock(&c->lock);
        return error;
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
    return 0;
}

void coefficient_io_start(coefficient_file *c) {
    if (!c->writer_started && pthread_create(&c->writer, NULL, write_behind, c) == 0) c->writer_started = 1;
}

void coefficient_io_stop(coefficient_file *c) {
    if (!c->writer_started) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->writer, NULL);
    c->writer_started = 0;
    c->stopping = 0;
}
