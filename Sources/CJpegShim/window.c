/* window.c: per-level writers (two-tile-row mmap window, or pwrite strips) and the shrink chain. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pyramid.h"
#include "rows.h"

cjs_status cjs_fail_io(cjs_pyramid *p, int error_number) {
    if (p->threaded) pthread_mutex_lock(&p->lock);
    if (!p->failed) p->error_number = error_number;
    p->failed = 1;
    if (p->threaded) {
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
    }
    return CJS_ERR_IO;
}

static void unmap_window(level_writer *w) {
    if (w->window) munmap(w->window, w->tile_row_bytes * w->window_count);
    w->window = NULL;
}

/* Maps tile rows [first, first + 2) (fewer at the bottom), reserving their disk space first so a
 * full disk is an ENOSPC here and never a SIGBUS on a store into the mapping. */
static cjs_status map_window(cjs_pyramid *p, level_writer *w, uint32_t first) {
    unmap_window(w);
    uint32_t count = w->geometry.rows - first < 2 ? w->geometry.rows - first : 2;
    off_t offset = (off_t)first * (off_t)w->tile_row_bytes;
    size_t length = w->tile_row_bytes * count;
    int rc = posix_fallocate(w->geometry.fd, offset, (off_t)length);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return cjs_fail_io(p, rc);
    void *m = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, w->geometry.fd, offset);
    if (m == MAP_FAILED) return cjs_fail_io(p, errno);
    w->window = m;
    w->window_first = first;
    w->window_count = count;
    return CJS_OK;
}

cjs_status cjs_write_strip(cjs_pyramid *p, level_writer *w, int strip, uint32_t tile_row) {
    size_t done = 0;
    off_t offset = (off_t)tile_row * (off_t)w->tile_row_bytes;
    int fd = w->direct_fd >= 0 ? w->direct_fd : w->geometry.fd;
    while (done < w->tile_row_bytes) {
        ssize_t n = pwrite(fd, w->strips[strip] + done, w->tile_row_bytes - done, offset + (off_t)done);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (fd == w->direct_fd && errno == EINVAL) { /* O_DIRECT refused after all: buffered */
                fd = w->geometry.fd;
                continue;
            }
            return cjs_fail_io(p, errno);
        }
        if (n == 0) return cjs_fail_io(p, EIO);
        done += (size_t)n;
    }
    return CJS_OK;
}

/* A tile row is complete: write it out (pwrite) or let the window move past it (mmap). */
static cjs_status complete_tile_row(cjs_pyramid *p, uint32_t index, uint32_t tile_row, uint32_t rows_in_use) {
    level_writer *w = &p->levels[index];
    if (p->kind == CJS_WRITER_MMAP) {
        unmap_window(w); /* the window is mapped again at the next row */
        cjs_mark_complete(p, index, tile_row + 1);
        return CJS_OK;
    }
    /* The last tile row may hold stale rows of an earlier one below the image: zero them. */
    if (rows_in_use < p->tile_size) {
        for (uint32_t c = 0; c < w->geometry.columns; c++)
            memset(w->strips[w->current] + c * p->tile_bytes + (size_t)rows_in_use * p->tile_size * 4, 0,
                   (size_t)(p->tile_size - rows_in_use) * p->tile_size * 4);
    }
    if (p->double_strips) return cjs_pipeline_hand_over(p, index, tile_row);
    cjs_status s = cjs_write_strip(p, w, w->current, tile_row);
    if (s == CJS_OK) cjs_mark_complete(p, index, tile_row + 1);
    return s;
}

static uint8_t *tile_row_base(cjs_pyramid *p, level_writer *w, uint32_t tile_row, cjs_status *status) {
    *status = CJS_OK;
    if (p->kind == CJS_WRITER_PWRITE) return w->strips[w->current];
    if (!w->window || tile_row >= w->window_first + w->window_count) {
        *status = map_window(p, w, tile_row);
        if (*status != CJS_OK) return NULL;
    }
    return w->window + (tile_row - w->window_first) * w->tile_row_bytes;
}

/* Feeds one row of level `index` to the shrink into level index + 1. */
static cjs_status shrink_into_next(cjs_pyramid *p, uint32_t index, const uint8_t *row, int last) {
    level_writer *w = &p->levels[index];
    if (!w->has_pending) {
        if (!last) {
            memcpy(w->pending, row, (size_t)w->geometry.width * 4);
            w->has_pending = 1;
            return CJS_OK;
        }
        cjs_shrink_rows(row, row, w->geometry.width, w->shrunk); /* odd last row, with itself */
    } else {
        cjs_shrink_rows(w->pending, row, w->geometry.width, w->shrunk);
        w->has_pending = 0;
    }
    return cjs_level_push_row(p, index + 1, w->shrunk);
}

cjs_status cjs_level_push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row) {
    level_writer *w = &p->levels[index];
    if (w->rows_pushed >= w->geometry.height) return CJS_ERR_ARGUMENT;
    uint32_t padded_y = w->geometry.y_offset + w->rows_pushed;
    uint32_t tile_row = padded_y / p->tile_size;
    uint32_t y_in_tile = padded_y % p->tile_size;
    cjs_status s;
    uint8_t *base = tile_row_base(p, w, tile_row, &s);
    if (!base) return s;
    cjs_scatter_row(row, w->geometry.width, w->geometry.x_offset, p->tile_size, base, y_in_tile);
    w->rows_pushed++;
    int last = w->rows_pushed == w->geometry.height;
    if (index + 1 < p->count) {
        s = shrink_into_next(p, index, row, last);
        if (s != CJS_OK) return s;
    }
    if (y_in_tile == p->tile_size - 1 || last) return complete_tile_row(p, index, tile_row, y_in_tile + 1);
    return CJS_OK;
}

static int open_direct(int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
}

static cjs_status init_level(cjs_pyramid *p, uint32_t i, const cjs_level *levels, int flags) {
    level_writer *w = &p->levels[i];
    const cjs_level *g = &levels[i];
    w->geometry = *g;
    w->direct_fd = -1;
    if (g->width == 0 || g->height == 0 || g->x_offset >= p->tile_size || g->y_offset >= p->tile_size ||
        (uint64_t)g->x_offset + g->width > (uint64_t)g->columns * p->tile_size ||
        (uint64_t)g->y_offset + g->height > (uint64_t)g->rows * p->tile_size)
        return CJS_ERR_ARGUMENT;
    w->tile_row_bytes = (size_t)g->columns * p->tile_bytes;
    if (ftruncate(g->fd, (off_t)w->tile_row_bytes * (off_t)g->rows) != 0) return cjs_fail_io(p, errno);
    if (p->kind == CJS_WRITER_PWRITE) {
        for (int s = 0; s < (p->double_strips ? 2 : 1); s++) {
            /* 4096-aligned and zeroed: O_DIRECT needs the alignment, padding needs the zeros. */
            if (posix_memalign((void **)&w->strips[s], 4096, w->tile_row_bytes) != 0) return CJS_ERR_NOMEM;
            memset(w->strips[s], 0, w->tile_row_bytes);
        }
        if (flags & CJS_PYRAMID_DIRECT_IO) w->direct_fd = open_direct(g->fd);
    }
    if (i + 1 < p->count) {
        w->pending = malloc((size_t)g->width * 4);
        w->shrunk = malloc((size_t)levels[i + 1].width * 4 + 4);
        if (!w->pending || !w->shrunk) return CJS_ERR_NOMEM;
    }
    return CJS_OK;
}

cjs_status cjs_pyramid_create(const cjs_level *levels, uint32_t count, uint32_t tile_size,
                              int32_t writer_kind, int32_t flags, uint32_t *progress, cjs_pyramid **out) {
    if (!out || !levels || count == 0 || tile_size == 0 || tile_size > 4096) return CJS_ERR_ARGUMENT;
    if (writer_kind != CJS_WRITER_MMAP && writer_kind != CJS_WRITER_PWRITE) return CJS_ERR_ARGUMENT;
    *out = NULL;
    cjs_pyramid *p = calloc(1, sizeof *p);
    if (!p) return CJS_ERR_NOMEM;
    p->levels = calloc(count, sizeof *p->levels);
    if (!p->levels) { free(p); return CJS_ERR_NOMEM; }
    p->count = count;
    p->tile_size = tile_size;
    p->tile_bytes = (size_t)tile_size * tile_size * 4;
    p->kind = writer_kind;
    p->progress = progress;
    p->threaded = writer_kind == CJS_WRITER_PWRITE && (flags & CJS_PYRAMID_THREADED);
    p->double_strips = p->threaded && (flags & CJS_PYRAMID_DOUBLE_STRIPS);
    /* Without an I/O thread the worker stalls while a strip is written: a deeper ring lets the
     * decoder go on meanwhile (8 slots of 32 rows: about the time of one level-0 strip write). */
    p->ring_slots = !p->threaded ? 1 : p->double_strips ? 4 : 8;
    /* The lock exists whenever threaded, before anything can fail, so destroy can always take it. */
    if (p->threaded && (pthread_mutex_init(&p->lock, NULL) != 0 || pthread_cond_init(&p->changed, NULL) != 0)) {
        free(p->levels);
        free(p);
        return CJS_ERR_NOMEM;
    }
    cjs_status status = CJS_OK;
    for (uint32_t i = 0; i < count && status == CJS_OK; i++) {
        p->levels[i].direct_fd = -1;
        status = init_level(p, i, levels, flags);
    }
    p->slot_stride = (size_t)levels[0].width * 4;
    for (int s = 0; s < p->ring_slots && status == CJS_OK; s++)
        if (!(p->slots[s] = malloc(p->slot_stride * RING_ROWS))) status = CJS_ERR_NOMEM;
    if (status == CJS_OK && p->threaded) status = cjs_pipeline_start(p);
    if (status != CJS_OK) {
        cjs_pyramid_destroy(p);
        return status;
    }
    *out = p;
    return CJS_OK;
}

void cjs_pyramid_destroy(cjs_pyramid *p) {
    if (!p) return;
    cjs_pipeline_stop(p);
    for (uint32_t i = 0; i < p->count; i++) {
        level_writer *w = &p->levels[i];
        unmap_window(w);
        if (w->direct_fd >= 0) close(w->direct_fd);
        free(w->strips[0]);
        free(w->strips[1]);
        free(w->pending);
        free(w->shrunk);
    }
    for (int s = 0; s < RING_SLOTS_MAX; s++) free(p->slots[s]);
    free(p->levels);
    free(p);
}

cjs_status cjs_pyramid_push_rows(cjs_pyramid *p, const void *rows, size_t stride, uint32_t count) {
    if (!rows && count) return CJS_ERR_ARGUMENT;
    const uint8_t *row = rows;
    while (count > 0) {
        void *slot;
        size_t slot_stride;
        uint32_t capacity;
        cjs_status s = cjs_pyramid_acquire_rows(p, &slot, &slot_stride, &capacity);
        if (s != CJS_OK) return s;
        uint32_t n = count < capacity ? count : capacity;
        for (uint32_t i = 0; i < n; i++)
            memcpy((uint8_t *)slot + i * slot_stride, row + i * stride, (size_t)p->levels[0].geometry.width * 4);
        s = cjs_pyramid_submit_rows(p, n);
        if (s != CJS_OK) return s;
        row += n * stride;
        count -= n;
    }
    return CJS_OK;
}

cjs_status cjs_pyramid_finish(cjs_pyramid *p) {
    cjs_status s = cjs_pyramid_sync(p);
    if (s != CJS_OK) return s;
    for (uint32_t i = 0; i < p->count; i++) {
        level_writer *w = &p->levels[i];
        if (w->rows_pushed != w->geometry.height) return CJS_ERR_STATE;
        unmap_window(w);
    }
    return CJS_OK;
}

void cjs_mark_complete(cjs_pyramid *p, uint32_t level, uint32_t tile_rows) {
    p->levels[level].tile_rows_done = tile_rows;
    if (p->progress) __atomic_store_n(&p->progress[level], tile_rows, __ATOMIC_RELEASE);
}

uint32_t cjs_load_progress(const uint32_t *entry) { return __atomic_load_n(entry, __ATOMIC_ACQUIRE); }

int32_t cjs_pyramid_errno(const cjs_pyramid *p) { return p->error_number; }
