/*
 * band_writer.c: the band writer. A level's rows are scattered into bands of band_rows rows; a
 * band buffer holds, per tile column, the band's rows of that tile: one contiguous block of the
 * tile in the file, so a full band is written as `columns` blocks of band_rows * tile_size * 4
 * bytes (64 KiB for 256-pixel tiles), asynchronously through aio.c when writing behind, else with
 * pwrite. Memory per level is a few bands, O(width), never whole tile rows.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "aio.h"
#include "rows.h"
#include "writer.h"

enum { BANDS_MAX = 3, DEFAULT_BAND_ROWS = 64 };

typedef struct band_buffer {
    uint8_t *data;          /* columns blocks of chunk_bytes: anonymous pages, zero until written */
    size_t byte_count;      /* the mapping's length */
    struct iocb *iocbs;     /* one per column */
    struct iocb **list;
    aio_completion completion; /* every column's write completes here */
    struct level_writer *writer;
    uint32_t band;          /* the band of the level it holds */
    uint32_t pending;       /* writes still in flight */
    int in_use;             /* being filled or written */
} band_buffer;

struct level_writer {
    cjs_level level;
    uint32_t tile_size;
    size_t tile_bytes;
    size_t tile_row_bytes;  /* columns * tile bytes: one tile row, contiguous in the file */
    uint32_t band_rows;
    size_t chunk_bytes;     /* one tile's rows of one band */
    int band_count;
    writer_shared *shared;
    aio_queue *aio;
    uint32_t *progress;
    int direct_fd;          /* an O_DIRECT descriptor of the same file, or -1 */
    band_buffer bands[BANDS_MAX];
    int filling;            /* the buffer being filled, or -1 */
    uint32_t last_band;     /* the last band holding image rows */
    uint32_t bands_done;    /* every band with image rows below this one is written */
    uint32_t done_mask;     /* bit i: band bands_done + i written (out of order) */
    uint32_t tile_rows_done;
};

static void chunk_written(aio_completion *completion, int error);

static int open_direct(int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
}

static void band_destroy(level_writer *w) {
    if (!w) return;
    for (int b = 0; b < BANDS_MAX; b++) {
        if (w->bands[b].data) munmap(w->bands[b].data, w->bands[b].byte_count);
        free(w->bands[b].iocbs);
        free(w->bands[b].list);
    }
    if (w->direct_fd >= 0) close(w->direct_fd);
    free(w);
}

static cjs_status band_create(const writer_setup *setup, level_writer **out) {
    const cjs_writer_config *config = setup->config;
    uint32_t tile_size = setup->tile_size;
    uint32_t band_rows = config->band_rows ? config->band_rows
                         : tile_size % DEFAULT_BAND_ROWS == 0 ? DEFAULT_BAND_ROWS : tile_size;
    if (band_rows > tile_size || tile_size % band_rows) return CJS_ERR_ARGUMENT;
    level_writer *w = calloc(1, sizeof *w);
    if (!w) return CJS_ERR_NOMEM;
    w->direct_fd = -1;
    w->level = setup->level;
    w->tile_size = tile_size;
    w->tile_bytes = setup->tile_bytes;
    w->tile_row_bytes = (size_t)setup->level.columns * setup->tile_bytes;
    w->band_rows = band_rows;
    w->chunk_bytes = (size_t)band_rows * tile_size * 4;
    w->shared = setup->shared;
    w->aio = setup->aio;
    w->progress = setup->progress;
    w->filling = -1;
    w->bands_done = setup->level.y_offset / band_rows;
    w->last_band = (setup->level.y_offset + setup->level.height - 1) / band_rows;
    /* Writing behind: three bands (one filling, two in flight), two when a band is a whole tile
     * row; otherwise one, written before the next is filled. */
    w->band_count = !setup->aio ? 1 : band_rows == tile_size ? 2 : 3;
    uint32_t columns = setup->level.columns;
    for (int b = 0; b < w->band_count; b++) {
        band_buffer *buffer = &w->bands[b];
        /* Anonymous pages are 4096-aligned (O_DIRECT needs it) and read as zeros (padding needs
         * it) without being touched: a band costs memory only once rows land in it, so a header
         * that claims a huge size and whose data then ends costs next to nothing. */
        size_t bytes = (size_t)columns * w->chunk_bytes;
        void *data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        buffer->iocbs = calloc(columns, sizeof *buffer->iocbs);
        buffer->list = calloc(columns, sizeof *buffer->list);
        if (data != MAP_FAILED) {
            buffer->data = data;
            buffer->byte_count = bytes;
        }
        if (data == MAP_FAILED || !buffer->iocbs || !buffer->list) {
            band_destroy(w);
            return CJS_ERR_NOMEM;
        }
        for (uint32_t c = 0; c < columns; c++) buffer->list[c] = &buffer->iocbs[c];
        buffer->completion.done = chunk_written;
        buffer->writer = w;
    }
    /* O_DIRECT only where every block and its offset are 4096-aligned (tiles of 256 and 64-row
     * bands: 64 KiB); elsewhere the page cache. */
    if (config->bypass_page_cache && w->chunk_bytes % 4096 == 0 && w->tile_bytes % 4096 == 0)
        w->direct_fd = open_direct(setup->level.fd);
    if (setup->aio) aio_queue_reserve(setup->aio, (long)columns * w->band_count);
    *out = w;
    return CJS_OK;
}

/* A synchronous write of one block (O_DIRECT where possible, else through the page cache). */
static int write_block(level_writer *w, const uint8_t *data, size_t length, off_t offset) {
    size_t done = 0;
    int fd = w->direct_fd >= 0 ? w->direct_fd : w->level.fd;
    while (done < length) {
        ssize_t n = pwrite(fd, data + done, length - done, offset + (off_t)done);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (fd == w->direct_fd && errno == EINVAL) { /* O_DIRECT refused after all: buffered */
                fd = w->level.fd;
                continue;
            }
            return errno;
        }
        if (n == 0) return EIO;
        done += (size_t)n;
    }
    return 0;
}

/* Band `band` is written: advance the in-order count and publish the complete tile rows. */
static void band_written(level_writer *w, uint32_t band) {
    w->done_mask |= 1u << (band - w->bands_done); /* in flight: at most band_count ahead */
    while (w->done_mask & 1u) {
        w->done_mask >>= 1;
        w->bands_done++;
    }
    uint32_t per_tile_row = w->tile_size / w->band_rows;
    uint32_t rows = w->bands_done > w->last_band ? w->level.rows : w->bands_done / per_tile_row;
    if (rows != w->tile_rows_done) {
        w->tile_rows_done = rows;
        writer_publish_progress(w->progress, rows);
    }
}

/* One block of a band is written (the shared lock held): frees the buffer after its last block. */
static void chunk_written(aio_completion *completion, int error) {
    band_buffer *buffer = (band_buffer *)((char *)completion - offsetof(band_buffer, completion));
    level_writer *w = buffer->writer;
    writer_shared *s = w->shared;
    if (error) writer_fail_locked(s, error);
    if (--buffer->pending > 0) return;
    buffer->in_use = 0;
    if (!s->failed) band_written(w, buffer->band);
    if (s->threaded) pthread_cond_broadcast(&s->changed);
}

/* A free buffer for `band` (waits for a write to finish when every buffer is busy). */
static cjs_status acquire_band(level_writer *w, uint32_t band) {
    writer_shared *s = w->shared;
    writer_lock(s);
    for (;;) {
        for (int b = 0; b < w->band_count; b++) {
            if (!w->bands[b].in_use) {
                w->bands[b].in_use = 1;
                w->bands[b].band = band;
                w->filling = b;
                int failed = s->failed;
                writer_unlock(s);
                return failed ? CJS_ERR_IO : CJS_OK;
            }
        }
        if (!s->threaded || s->failed || s->stopping) break;
        pthread_cond_wait(&s->changed, &s->lock);
    }
    writer_unlock(s);
    return CJS_ERR_IO;
}

/* Writes the filled band. A band cut short by the image's end writes only its rows (rounded up to
 * whole 4096-byte blocks under O_DIRECT, the rows past them zeroed first: a reused buffer holds an
 * earlier band's rows); the file's rows below are padding the writer never touches, and read as
 * zeros. */
static cjs_status write_band(level_writer *w, uint32_t rows_in_use) {
    writer_shared *s = w->shared;
    band_buffer *buffer = &w->bands[w->filling];
    w->filling = -1;
    uint32_t columns = w->level.columns;
    size_t row_bytes = (size_t)w->tile_size * 4;
    uint32_t rows_written = w->band_rows;
    if (rows_in_use < w->band_rows) {
        uint32_t quantum = 1; /* rows per 4096-byte multiple */
        while ((quantum * row_bytes) % 4096 != 0 && quantum < w->band_rows) quantum++;
        rows_written = (rows_in_use + quantum - 1) / quantum * quantum;
        if (rows_written > w->band_rows) rows_written = w->band_rows;
        for (uint32_t c = 0; c < columns; c++)
            memset(buffer->data + c * w->chunk_bytes + rows_in_use * row_bytes, 0,
                   (rows_written - rows_in_use) * row_bytes);
    }
    size_t length = rows_written * row_bytes;
    uint32_t band_rows_before = buffer->band * w->band_rows;
    uint32_t tile_row = band_rows_before / w->tile_size;
    off_t base = (off_t)tile_row * (off_t)w->tile_row_bytes + (off_t)(band_rows_before % w->tile_size) * (off_t)row_bytes;
    int fd = w->direct_fd >= 0 ? w->direct_fd : w->level.fd;
    buffer->completion.expected_bytes = length;
    for (uint32_t c = 0; c < columns; c++) {
        struct iocb *cb = &buffer->iocbs[c];
        memset(cb, 0, sizeof *cb);
        cb->aio_data = (uint64_t)(uintptr_t)&buffer->completion;
        cb->aio_lio_opcode = IOCB_CMD_PWRITE;
        cb->aio_fildes = (uint32_t)fd;
        cb->aio_buf = (uint64_t)(uintptr_t)(buffer->data + c * w->chunk_bytes);
        cb->aio_nbytes = length;
        cb->aio_offset = (int64_t)(base + (off_t)c * (off_t)w->tile_bytes);
    }
    writer_lock(s);
    buffer->pending = columns;
    writer_unlock(s);
    uint32_t submitted = w->aio ? aio_queue_submit(w->aio, buffer->list, columns) : 0;
    /* Without AIO (or what it refused): synchronous writes, completed here. */
    for (uint32_t c = submitted; c < columns; c++) {
        struct iocb *cb = &buffer->iocbs[c];
        int error = write_block(w, buffer->data + c * w->chunk_bytes, length, (off_t)cb->aio_offset);
        writer_lock(s);
        chunk_written(&buffer->completion, error);
        int failed = s->failed;
        writer_unlock(s);
        if (failed) return CJS_ERR_IO;
    }
    return CJS_OK;
}

static cjs_status band_push_row(level_writer *w, const uint8_t *row, uint32_t index, int last) {
    uint32_t padded_y = w->level.y_offset + index;
    uint32_t band = padded_y / w->band_rows;
    uint32_t y_in_band = padded_y % w->band_rows;
    if (w->filling < 0) {
        cjs_status s = acquire_band(w, band);
        if (s != CJS_OK) return s;
        /* A tile row's first band reserves the tile row's blocks: the file fills as data arrives (a
         * header claiming a huge size allocates nothing ahead), and a full disk fails here, before
         * the row's writes, rather than in the middle of them. */
        if (band % (w->tile_size / w->band_rows) == 0 || band == w->level.y_offset / w->band_rows) {
            off_t start = (off_t)(band * w->band_rows / w->tile_size) * (off_t)w->tile_row_bytes;
            if (writer_reserve(w->shared, w->level.fd, start, (off_t)w->tile_row_bytes) != CJS_OK) return CJS_ERR_IO;
        }
    }
    cjs_scatter_row(row, w->level.width, w->level.x_offset, w->tile_size, w->chunk_bytes,
                    w->bands[w->filling].data, y_in_band);
    if (y_in_band == w->band_rows - 1 || last) return write_band(w, y_in_band + 1);
    return CJS_OK;
}

const writer_methods band_writer_methods = {
    .create = band_create,
    .push_row = band_push_row,
    .destroy = band_destroy,
};
