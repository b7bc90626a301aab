/* window.c: per-level writers (two-tile-row mmap window, or bands: see bands.c) and the shrink chain. */
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
    if (w->window) munmap(w->window - w->window_delta, w->tile_row_bytes * w->window_count + w->window_delta);
    w->window = NULL;
}

/* Maps tile rows [first, first + 2) (fewer at the bottom), reserving their disk space first so a
 * full disk is an ENOSPC here and never a SIGBUS on a store into the mapping. */
static cjs_status map_window(cjs_pyramid *p, level_writer *w, uint32_t first) {
    unmap_window(w);
    uint32_t count = w->geometry.rows - first < 2 ? w->geometry.rows - first : 2;
    off_t offset = (off_t)first * (off_t)w->tile_row_bytes;
    size_t length = w->tile_row_bytes * count;
    if (cjs_reserve(p, w, offset, (off_t)length) != CJS_OK) return CJS_ERR_IO;
    /* mmap wants a page-aligned offset: tile rows of tiles whose bytes are not a page multiple start
     * inside a page, so map from the page below. */
    size_t delta = (size_t)(offset % (off_t)sysconf(_SC_PAGESIZE));
    void *m = mmap(NULL, length + delta, PROT_READ | PROT_WRITE, MAP_SHARED, w->geometry.fd, offset - (off_t)delta);
    if (m == MAP_FAILED) return cjs_fail_io(p, errno);
    w->window = (uint8_t *)m + delta;
    w->window_delta = delta;
    w->window_first = first;
    w->window_count = count;
    return CJS_OK;
}

cjs_status cjs_reserve(cjs_pyramid *p, level_writer *w, off_t offset, off_t length) {
    int rc = posix_fallocate(w->geometry.fd, offset, length);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return cjs_fail_io(p, rc);
    return CJS_OK; /* file systems without fallocate report a full disk at the write instead */
}

void cjs_lock(cjs_pyramid *p) {
    if (p->threaded) pthread_mutex_lock(&p->lock);
}

void cjs_unlock(cjs_pyramid *p) {
    if (p->threaded) pthread_mutex_unlock(&p->lock);
}

/* The mmap window's base for `tile_row`, mapping the next two tile rows when it moves on. */
static uint8_t *window_base(cjs_pyramid *p, level_writer *w, uint32_t tile_row, cjs_status *status) {
    *status = CJS_OK;
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
    w->rows_pushed++;
    int last = w->rows_pushed == w->geometry.height;
    cjs_status s = CJS_OK;
    if (p->kind == CJS_WRITER_PWRITE) {
        s = cjs_band_push_row(p, index, row, last);
    } else {
        uint32_t padded_y = w->geometry.y_offset + w->rows_pushed - 1;
        uint32_t tile_row = padded_y / p->tile_size;
        uint32_t y_in_tile = padded_y % p->tile_size;
        uint8_t *base = window_base(p, w, tile_row, &s);
        if (!base) return s;
        cjs_scatter_row(row, w->geometry.width, w->geometry.x_offset, p->tile_size, p->tile_bytes, base, y_in_tile);
        if (y_in_tile == p->tile_size - 1 || last) {
            unmap_window(w); /* the window is mapped again at the next row */
            cjs_mark_complete(p, index, tile_row + 1);
        }
    }
    if (s != CJS_OK) return s;
    if (index + 1 < p->count) return shrink_into_next(p, index, row, last);
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
        cjs_status s = cjs_bands_init(p, i);
        if (s != CJS_OK) return s;
        /* O_DIRECT only where every block and its offset are 4096-aligned (tiles of 256 and 64-row
         * bands: 64 KiB); elsewhere the page cache. */
        if ((flags & CJS_PYRAMID_DIRECT_IO) && p->chunk_bytes % 4096 == 0 && p->tile_bytes % 4096 == 0)
            w->direct_fd = open_direct(g->fd);
    }
    if (i + 1 < p->count) {
        w->pending = malloc((size_t)g->width * 4);
        w->shrunk = malloc((size_t)levels[i + 1].width * 4 + 4);
        if (!w->pending || !w->shrunk) return CJS_ERR_NOMEM;
    }
    return CJS_OK;
}

cjs_status cjs_pyramid_create(const cjs_level *levels, uint32_t count, uint32_t tile_size, uint32_t band_rows,
                              int32_t writer_kind, int32_t flags, uint32_t *progress, cjs_pyramid **out) {
    if (!out || !levels || count == 0 || tile_size == 0 || tile_size > 4096) return CJS_ERR_ARGUMENT;
    if (band_rows > tile_size || (band_rows && tile_size % band_rows)) return CJS_ERR_ARGUMENT;
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
    /* Bands of 64 rows by default (64 KiB blocks for 256-pixel tiles, aligned for O_DIRECT); whole
     * tile rows for tiles whose size 64 does not divide. Writing behind: three bands a level (one
     * filling, two in flight), two when bands are whole tile rows; otherwise one, written before the
     * next is filled. */
    p->band_rows = band_rows ? band_rows : tile_size % BAND_ROWS == 0 ? BAND_ROWS : tile_size;
    p->chunk_bytes = (size_t)p->band_rows * tile_size * 4;
    p->has_aio = p->threaded && (flags & CJS_PYRAMID_WRITE_BEHIND);
    p->band_count = !p->has_aio ? 1 : p->band_rows == tile_size ? 2 : 3;
    p->ring_slots = !p->threaded ? 1 : 4;
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
        cjs_bands_free(w);
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
