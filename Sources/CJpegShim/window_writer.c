/*
 * window_writer.c: the window writer. A shared mapping of two tile rows of the level's file; each
 * row is scattered into its tiles there, and the kernel writes the pages back. The window moves on
 * (is mapped again) when a row falls past it; a complete tile row is unmapped at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rows.h"
#include "writer.h"

struct level_writer {
    cjs_level level;
    uint32_t tile_size;
    size_t tile_bytes;
    size_t tile_row_bytes;  /* columns * tile bytes: one tile row, contiguous in the file */
    writer_shared *shared;
    uint32_t *progress;
    uint8_t *window;        /* tile rows [window_first, window_first + window_count) */
    size_t window_delta;    /* the window's start past the page boundary it is mapped from */
    uint32_t window_first;
    uint32_t window_count;
};

static void unmap_window(level_writer *w) {
    if (w->window) munmap(w->window - w->window_delta, w->tile_row_bytes * w->window_count + w->window_delta);
    w->window = NULL;
}

/* Maps tile rows [first, first + 2) (fewer at the bottom), reserving their disk space first so a
 * full disk is an ENOSPC here and never a SIGBUS on a store into the mapping. */
static cjs_status map_window(level_writer *w, uint32_t first) {
    unmap_window(w);
    uint32_t count = w->level.rows - first < 2 ? w->level.rows - first : 2;
    off_t offset = (off_t)first * (off_t)w->tile_row_bytes;
    size_t length = w->tile_row_bytes * count;
    if (writer_reserve(w->shared, w->level.fd, offset, (off_t)length) != CJS_OK) return CJS_ERR_IO;
    /* mmap wants a page-aligned offset: tile rows of tiles whose bytes are not a page multiple start
     * inside a page, so map from the page below. */
    size_t delta = (size_t)(offset % (off_t)sysconf(_SC_PAGESIZE));
    void *m = mmap(NULL, length + delta, PROT_READ | PROT_WRITE, MAP_SHARED, w->level.fd, offset - (off_t)delta);
    if (m == MAP_FAILED) return writer_fail(w->shared, errno);
    w->window = (uint8_t *)m + delta;
    w->window_delta = delta;
    w->window_first = first;
    w->window_count = count;
    return CJS_OK;
}

static cjs_status window_create(const writer_setup *setup, level_writer **out) {
    level_writer *w = calloc(1, sizeof *w);
    if (!w) return CJS_ERR_NOMEM;
    w->level = setup->level;
    w->tile_size = setup->tile_size;
    w->tile_bytes = setup->tile_bytes;
    w->tile_row_bytes = (size_t)setup->level.columns * setup->tile_bytes;
    w->shared = setup->shared;
    w->progress = setup->progress;
    *out = w;
    return CJS_OK;
}

static cjs_status window_push_row(level_writer *w, const uint8_t *row, uint32_t index, int last) {
    uint32_t padded_y = w->level.y_offset + index;
    uint32_t tile_row = padded_y / w->tile_size;
    uint32_t y_in_tile = padded_y % w->tile_size;
    if (!w->window || tile_row >= w->window_first + w->window_count) {
        cjs_status s = map_window(w, tile_row);
        if (s != CJS_OK) return s;
    }
    uint8_t *base = w->window + (tile_row - w->window_first) * w->tile_row_bytes;
    cjs_scatter_row(row, w->level.width, w->level.x_offset, w->tile_size, w->tile_bytes, base, y_in_tile);
    if (y_in_tile == w->tile_size - 1 || last) {
        unmap_window(w); /* the window is mapped again at the next row */
        writer_publish_progress(w->progress, tile_row + 1);
    }
    return CJS_OK;
}

static void window_destroy(level_writer *w) {
    if (!w) return;
    unmap_window(w);
    free(w);
}

const writer_methods window_writer_methods = {
    .create = window_create,
    .push_row = window_push_row,
    .destroy = window_destroy,
};
