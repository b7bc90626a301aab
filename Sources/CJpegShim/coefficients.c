/* coefficients.c: libjpeg's virtual block arrays in a temporary file, a window of rows in memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "coefficients.h"
#include "errors.h"

/* Default memory for one array's window; never less than twice the rows libjpeg accesses at once. */
#define DEFAULT_WINDOW_BYTES ((size_t)1 << 20)
/* Rows per preadv/pwritev call stay under IOV_MAX (1024). */
#define MAX_WINDOW_ROWS 512

/*
 * One virtual block array: `row_count` rows of `blocks_per_row` blocks, stored at `offset` in the
 * file, row after row. In memory: `window_rows` rows starting at `window_start`, each in a buffer of
 * its own (`rows[i]` holds row window_start + i), so moving the window forward keeps the rows both
 * windows share by moving pointers, not blocks.
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
    JBLOCK *memory;        /* window_rows * row_bytes, owned */
    JDIMENSION dirty_start, dirty_end; /* rows changed since written to the file */
    /* Rows from here on have never been written: they read as zeros (pre_zero) and are not on disk. */
    JDIMENSION first_undefined;
};

static void io_failure(j_common_ptr cinfo, int writing, int number) {
    cjs_error_io(cinfo, writing ? "cannot write the coefficient file" : "cannot read the coefficient file",
                 number);
}

/* Reads or writes `count` rows starting at `first_row` from or into the buffers `rows`. */
static void transfer(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION first_row,
                     JDIMENSION count, JBLOCKROW *rows, int writing) {
    struct iovec vectors[MAX_WINDOW_ROWS];
    for (JDIMENSION i = 0; i < count; i++) {
        vectors[i].iov_base = rows[i];
        vectors[i].iov_len = a->row_bytes;
    }
    struct iovec *next = vectors;
    int left = (int)count;
    off_t position = a->offset + (off_t)first_row * (off_t)a->row_bytes;
    while (left > 0) {
        ssize_t done = writing ? pwritev(c->fd, next, left, position) : preadv(c->fd, next, left, position);
        if (done < 0) {
            if (errno == EINTR) continue;
            io_failure(cinfo, writing, errno);
        }
        if (done == 0) io_failure(cinfo, writing, writing ? ENOSPC : EIO); /* a file shorter than written */
        position += done;
        while (left > 0 && (size_t)done >= next->iov_len) {
            done -= (ssize_t)next->iov_len;
            next++;
            left--;
        }
        if (left > 0) {
            next->iov_base = (char *)next->iov_base + done;
            next->iov_len -= (size_t)done;
        }
    }
}

static void write_back(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a) {
    if (a->dirty_start >= a->dirty_end) return;
    transfer(cinfo, c, a, a->dirty_start, a->dirty_end - a->dirty_start,
             a->rows + (a->dirty_start - a->window_start), 1);
    a->dirty_start = a->dirty_end = 0;
}

/* Loads rows [first, end) of the window from the file, those that were ever written. */
static void load(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION first, JDIMENSION end) {
    if (end > a->first_undefined) end = a->first_undefined;
    if (first >= end) return;
    transfer(cinfo, c, a, first, end - first, a->rows + (first - a->window_start), 0);
}

/*
 * Moves the window to hold rows [start, end): forward, it starts at `start` (libjpeg walks the
 * arrays top to bottom, scan after scan); backward, it ends at `end`. Rows both windows hold stay.
 */
static void move_window(j_common_ptr cinfo, cjs_coefficients *c, cjs_block_array *a, JDIMENSION start,
                        JDIMENSION end) {
    write_back(cinfo, c, a);
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
    JDIMENSION free_count = 0;
    JBLOCKROW free_rows[MAX_WINDOW_ROWS];
    for (JDIMENSION i = 0; i < size; i++) {
        JDIMENSION row = a->window_start + i;
        if (!a->window_valid || row < keep_start || row >= keep_end) free_rows[free_count++] = a->rows[i];
    }
    JDIMENSION next_free = 0;
    for (JDIMENSION i = 0; i < size; i++) {
        JDIMENSION row = target + i;
        a->spare[i] = (row >= keep_start && row < keep_end) ? a->rows[row - a->window_start] : free_rows[next_free++];
    }
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
        a->memory = malloc(rows * a->row_bytes);
        if (!a->rows || !a->spare || !a->memory) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 11);
        for (size_t i = 0; i < rows; i++) a->rows[i] = (JBLOCKROW)((char *)a->memory + i * a->row_bytes);
        c->window_bytes += rows * a->row_bytes;
    }
}

static JBLOCKARRAY access_barray(j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start, JDIMENSION count,
                                 boolean writable) {
    cjs_coefficients *c = cjs_coefficients_of(cinfo);
    if (!c->active) return c->access_barray(cinfo, ptr, start, count, writable);
    cjs_block_array *a = (cjs_block_array *)(void *)ptr;
    JDIMENSION end = start + count;
    if (!a->memory || count > a->max_access || end > a->row_count || end < start)
        ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
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
    while (c->arrays) {
        cjs_block_array *a = c->arrays;
        c->arrays = a->next;
        free(a->rows);
        free(a->spare);
        free(a->memory);
        free(a);
    }
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->active = 0;
    c->file_bytes = 0;
    c->window_bytes = 0;
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
