/* bands.c: the pwrite writer. Rows are scattered into bands of band_rows rows; a full band is
 * written as one block per tile column (each block contiguous in the file), asynchronously through
 * Linux AIO when the pyramid writes behind, else synchronously. Memory per level is band_count
 * bands, O(width), instead of whole tile rows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pyramid.h"
#include "rows.h"

cjs_status cjs_bands_init(cjs_pyramid *p, uint32_t index) {
    level_writer *w = &p->levels[index];
    uint32_t columns = w->geometry.columns;
    size_t bytes = (size_t)columns * p->chunk_bytes;
    w->filling = -1;
    w->bands_done = w->geometry.y_offset / p->band_rows;
    w->last_band = (w->geometry.y_offset + w->geometry.height - 1) / p->band_rows;
    for (int b = 0; b < p->band_count; b++) {
        band_buffer *buffer = &w->bands[b];
        /* Anonymous pages are 4096-aligned (O_DIRECT needs it) and read as zeros (padding needs
         * it) without being touched: a band costs memory only once rows land in it, so a header
         * that claims a huge size and whose data then ends costs next to nothing. */
        void *data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (data == MAP_FAILED) return CJS_ERR_NOMEM;
        buffer->data = data;
        buffer->byte_count = bytes;
        buffer->iocbs = calloc(columns, sizeof *buffer->iocbs);
        buffer->list = calloc(columns, sizeof *buffer->list);
        if (!buffer->iocbs || !buffer->list) return CJS_ERR_NOMEM;
        for (uint32_t c = 0; c < columns; c++) buffer->list[c] = &buffer->iocbs[c];
    }
    return CJS_OK;
}

void cjs_bands_free(level_writer *w) {
    for (int b = 0; b < BANDS_MAX; b++) {
        if (w->bands[b].data) munmap(w->bands[b].data, w->bands[b].byte_count);
        free(w->bands[b].iocbs);
        free(w->bands[b].list);
        w->bands[b].data = NULL;
        w->bands[b].iocbs = NULL;
        w->bands[b].list = NULL;
    }
}

int cjs_write_block(level_writer *w, const uint8_t *data, size_t length, off_t offset) {
    size_t done = 0;
    int fd = w->direct_fd >= 0 ? w->direct_fd : w->geometry.fd;
    while (done < length) {
        ssize_t n = pwrite(fd, data + done, length - done, offset + (off_t)done);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (fd == w->direct_fd && errno == EINVAL) { /* O_DIRECT refused after all: buffered */
                fd = w->geometry.fd;
                continue;
            }
            return errno;
        }
        if (n == 0) return EIO;
        done += (size_t)n;
    }
    return 0;
}

/* Band `band` of the level is written: advance the in-order count and the complete tile rows. */
static void band_written(cjs_pyramid *p, uint32_t index, uint32_t band) {
    level_writer *w = &p->levels[index];
    w->done_mask |= 1u << (band - w->bands_done); /* in flight: at most band_count ahead */
    while (w->done_mask & 1u) {
        w->done_mask >>= 1;
        w->bands_done++;
    }
    uint32_t per_tile_row = p->tile_size / p->band_rows;
    uint32_t rows = w->bands_done > w->last_band ? w->geometry.rows : w->bands_done / per_tile_row;
    if (rows != w->tile_rows_done) cjs_mark_complete(p, index, rows);
}

void cjs_chunk_written(cjs_pyramid *p, uint32_t index, int buffer_index, int error) {
    level_writer *w = &p->levels[index];
    band_buffer *buffer = &w->bands[buffer_index];
    if (error) {
        if (!p->failed) p->error_number = error;
        p->failed = 1;
    }
    if (--buffer->pending > 0) return;
    buffer->in_use = 0;
    if (!p->failed) band_written(p, index, buffer->band);
    if (p->threaded) pthread_cond_broadcast(&p->changed);
}

/* A free buffer for `band` (waits for a write to finish when every buffer is busy). */
static cjs_status acquire_band(cjs_pyramid *p, level_writer *w, uint32_t band) {
    cjs_lock(p);
    for (;;) {
        for (int b = 0; b < p->band_count; b++) {
            if (!w->bands[b].in_use) {
                w->bands[b].in_use = 1;
                w->bands[b].band = band;
                w->filling = b;
                int failed = p->failed;
                cjs_unlock(p);
                return failed ? CJS_ERR_IO : CJS_OK;
            }
        }
        if (!p->threaded || p->failed || p->stopping) break;
        pthread_cond_wait(&p->changed, &p->lock);
    }
    cjs_unlock(p);
    return CJS_ERR_IO;
}

/* Writes the filled band. A band cut short by the image's end writes only its rows (rounded up to
 * whole 4096-byte blocks under O_DIRECT, the rows past them zeroed first: a reused buffer holds an
 * earlier band's rows); the file's rows below are padding the writer never touches, and read as
 * zeros. */
static cjs_status write_band(cjs_pyramid *p, uint32_t index, uint32_t rows_in_use) {
    level_writer *w = &p->levels[index];
    int b = w->filling;
    band_buffer *buffer = &w->bands[b];
    w->filling = -1;
    uint32_t columns = w->geometry.columns;
    size_t row_bytes = (size_t)p->tile_size * 4;
    uint32_t rows_written = p->band_rows;
    if (rows_in_use < p->band_rows) {
        uint32_t quantum = 1; /* rows per 4096-byte multiple */
        while ((quantum * row_bytes) % 4096 != 0 && quantum < p->band_rows) quantum++;
        rows_written = (rows_in_use + quantum - 1) / quantum * quantum;
        if (rows_written > p->band_rows) rows_written = p->band_rows;
        for (uint32_t c = 0; c < columns; c++)
            memset(buffer->data + c * p->chunk_bytes + rows_in_use * row_bytes, 0,
                   (rows_written - rows_in_use) * row_bytes);
    }
    size_t length = rows_written * row_bytes;
    uint32_t band_rows_before = buffer->band * p->band_rows;
    uint32_t tile_row = band_rows_before / p->tile_size;
    off_t base = (off_t)tile_row * (off_t)w->tile_row_bytes + (off_t)(band_rows_before % p->tile_size) * (off_t)row_bytes;
    int fd = w->direct_fd >= 0 ? w->direct_fd : w->geometry.fd;
    for (uint32_t c = 0; c < columns; c++) {
        struct iocb *cb = &buffer->iocbs[c];
        memset(cb, 0, sizeof *cb);
        cb->aio_data = (uint64_t)index << 48 | (uint64_t)b << 40 | (uint64_t)length; /* see the reaper */
        cb->aio_lio_opcode = IOCB_CMD_PWRITE;
        cb->aio_fildes = (uint32_t)fd;
        cb->aio_buf = (uint64_t)(uintptr_t)(buffer->data + c * p->chunk_bytes);
        cb->aio_nbytes = length;
        cb->aio_offset = (int64_t)(base + (off_t)c * (off_t)p->tile_bytes);
    }
    cjs_lock(p);
    buffer->pending = columns;
    uint32_t submitted = 0;
    if (p->has_aio) {
        p->io_in_flight += columns;
        pthread_cond_broadcast(&p->changed); /* wakes the reaper */
        cjs_unlock(p);
        while (submitted < columns) {
            long n = syscall(SYS_io_submit, p->aio, (long)(columns - submitted), buffer->list + submitted);
            if (n > 0) { submitted += (uint32_t)n; continue; }
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) { sched_yield(); continue; }
            break; /* refused: the rest synchronously, below */
        }
        cjs_lock(p);
        p->io_in_flight -= columns - submitted;
    }
    cjs_unlock(p);
    /* Without AIO (or what it refused): synchronous writes, completed here. */
    for (uint32_t c = submitted; c < columns; c++) {
        struct iocb *cb = &buffer->iocbs[c];
        int error = cjs_write_block(w, buffer->data + c * p->chunk_bytes, length, (off_t)cb->aio_offset);
        cjs_lock(p);
        cjs_chunk_written(p, index, b, error);
        int failed = p->failed;
        cjs_unlock(p);
        if (failed) return CJS_ERR_IO;
    }
    return CJS_OK;
}

cjs_status cjs_band_push_row(cjs_pyramid *p, uint32_t index, const uint8_t *row, int last) {
    level_writer *w = &p->levels[index];
    uint32_t padded_y = w->geometry.y_offset + w->rows_pushed - 1; /* the row was counted already */
    uint32_t band = padded_y / p->band_rows;
    uint32_t y_in_band = padded_y % p->band_rows;
    if (w->filling < 0) {
        cjs_status s = acquire_band(p, w, band);
        if (s != CJS_OK) return s;
        /* A tile row's first band reserves the tile row's blocks: the file fills as data arrives (a
         * header claiming a huge size allocates nothing ahead), and a full disk fails here, before
         * the row's writes, rather than in the middle of them. */
        if (band % (p->tile_size / p->band_rows) == 0 || band == w->geometry.y_offset / p->band_rows) {
            off_t start = (off_t)(band * p->band_rows / p->tile_size) * (off_t)w->tile_row_bytes;
            if (cjs_reserve(p, w, start, (off_t)w->tile_row_bytes) != CJS_OK) return CJS_ERR_IO;
        }
    }
    cjs_scatter_row(row, w->geometry.width, w->geometry.x_offset, p->tile_size, p->chunk_bytes,
                    w->bands[w->filling].data, y_in_band);
    if (y_in_band == p->band_rows - 1 || last) return write_band(p, index, y_in_band + 1);
    return CJS_OK;
}
