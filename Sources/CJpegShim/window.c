/* window.c: per-level writers (two-tile-row mmap window, or pwrite strips) and the shrink chain. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rows.h"

typedef struct {
    cjs_level geometry;
    size_t tile_row_bytes;     /* columns * tile bytes: one tile row, contiguous in the file */
    uint32_t rows_pushed;      /* image rows received */
    uint32_t tile_rows_done;
    /* mmap window: tile rows [window_first, window_first + window_count) */
    uint8_t *window;
    uint32_t window_first;
    uint32_t window_count;
    /* pwrite strip: one tile row */
    uint8_t *strip;
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
    int kind;
    int failed;
    int error_number;
};

static cjs_status fail_io(cjs_pyramid *p, int error_number) {
    p->failed = 1;
    p->error_number = error_number;
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
    off_t offset = (off_t)(first * w->tile_row_bytes);
    size_t length = w->tile_row_bytes * count;
    int rc = posix_fallocate(w->geometry.fd, offset, (off_t)length);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return fail_io(p, rc);
    void *m = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, w->geometry.fd, offset);
    if (m == MAP_FAILED) return fail_io(p, errno);
    w->window = m;
    w->window_first = first;
    w->window_count = count;
    return CJS_OK;
}

static cjs_status write_strip(cjs_pyramid *p, level_writer *w, uint32_t tile_row) {
    size_t done = 0;
    off_t offset = (off_t)(tile_row * w->tile_row_bytes);
    while (done < w->tile_row_bytes) {
        ssize_t n = pwrite(w->geometry.fd, w->strip + done, w->tile_row_bytes - done, offset + (off_t)done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return fail_io(p, errno);
        }
        if (n == 0) return fail_io(p, EIO);
        done += (size_t)n;
    }
    return CJS_OK;
}

/* A tile row is complete: write it out (pwrite) or let the window move past it (mmap). */
static cjs_status complete_tile_row(cjs_pyramid *p, level_writer *w, uint32_t tile_row, uint32_t rows_in_use) {
    if (p->kind == CJS_WRITER_PWRITE) {
        /* The last tile row may hold stale rows of the one before below the image: zero them. */
        if (rows_in_use < p->tile_size) {
            for (uint32_t c = 0; c < w->geometry.columns; c++)
                memset(w->strip + c * p->tile_bytes + (size_t)rows_in_use * p->tile_size * 4, 0,
                       (size_t)(p->tile_size - rows_in_use) * p->tile_size * 4);
        }
        cjs_status s = write_strip(p, w, tile_row);
        if (s != CJS_OK) return s;
    } else {
        /* Release the finished row's pages now; the window is mapped again at the next row. */
        unmap_window(w);
    }
    w->tile_rows_done = tile_row + 1;
    return CJS_OK;
}

static uint8_t *tile_row_base(cjs_pyramid *p, level_writer *w, uint32_t tile_row, cjs_status *status) {
    *status = CJS_OK;
    if (p->kind == CJS_WRITER_PWRITE) return w->strip;
    if (!w->window || tile_row >= w->window_first + w->window_count) {
        /* Slide: the rows before are complete; the new window starts at this row. */
        *status = map_window(p, w, tile_row);
        if (*status != CJS_OK) return NULL;
    }
    return w->window + (tile_row - w->window_first) * w->tile_row_bytes;
}

static cjs_status push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row);

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
    return push_row(p, index + 1, w->shrunk);
}

static cjs_status push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row) {
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
    if (y_in_tile == p->tile_size - 1 || last) {
        s = complete_tile_row(p, w, tile_row, y_in_tile + 1);
        if (s != CJS_OK) return s;
    }
    if (index + 1 < p->count) return shrink_into_next(p, index, row, last);
    return CJS_OK;
}

cjs_status cjs_pyramid_create(const cjs_level *levels, uint32_t count, uint32_t tile_size,
                              int32_t writer_kind, cjs_pyramid **out) {
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
    cjs_status status = CJS_OK;
    for (uint32_t i = 0; i < count && status == CJS_OK; i++) {
        level_writer *w = &p->levels[i];
        w->geometry = levels[i];
        const cjs_level *g = &levels[i];
        if (g->width == 0 || g->height == 0 || g->x_offset >= tile_size || g->y_offset >= tile_size ||
            (uint64_t)g->x_offset + g->width > (uint64_t)g->columns * tile_size ||
            (uint64_t)g->y_offset + g->height > (uint64_t)g->rows * tile_size) {
            status = CJS_ERR_ARGUMENT;
            break;
        }
        w->tile_row_bytes = (size_t)g->columns * p->tile_bytes;
        if (ftruncate(g->fd, (off_t)(w->tile_row_bytes * g->rows)) != 0) {
            status = fail_io(p, errno);
            break;
        }
        if (writer_kind == CJS_WRITER_PWRITE && !(w->strip = calloc(1, w->tile_row_bytes))) status = CJS_ERR_NOMEM;
        if (i + 1 < count) {
            w->pending = malloc((size_t)g->width * 4);
            w->shrunk = malloc((size_t)levels[i + 1].width * 4 + 4);
            if (!w->pending || !w->shrunk) status = CJS_ERR_NOMEM;
        }
    }
    if (status != CJS_OK) {
        cjs_pyramid_destroy(p);
        return status;
    }
    *out = p;
    return CJS_OK;
}

void cjs_pyramid_destroy(cjs_pyramid *p) {
    if (!p) return;
    for (uint32_t i = 0; i < p->count; i++) {
        level_writer *w = &p->levels[i];
        unmap_window(w);
        free(w->strip);
        free(w->pending);
        free(w->shrunk);
    }
    free(p->levels);
    free(p);
}

cjs_status cjs_pyramid_push_rows(cjs_pyramid *p, const void *rows, size_t stride, uint32_t count) {
    if (p->failed) return CJS_ERR_STATE;
    if (!rows && count) return CJS_ERR_ARGUMENT;
    const uint8_t *row = rows;
    for (uint32_t i = 0; i < count; i++, row += stride) {
        cjs_status s = push_row(p, 0, row);
        if (s != CJS_OK) return s;
    }
    return CJS_OK;
}

cjs_status cjs_pyramid_finish(cjs_pyramid *p) {
    if (p->failed) return CJS_ERR_STATE;
    for (uint32_t i = 0; i < p->count; i++) {
        level_writer *w = &p->levels[i];
        if (w->rows_pushed != w->geometry.height) return CJS_ERR_STATE;
        unmap_window(w);
    }
    return CJS_OK;
}

uint32_t cjs_pyramid_tile_rows_complete(const cjs_pyramid *p, uint32_t level) {
    return level < p->count ? p->levels[level].tile_rows_done : 0;
}

int32_t cjs_pyramid_errno(const cjs_pyramid *p) { return p->error_number; }
