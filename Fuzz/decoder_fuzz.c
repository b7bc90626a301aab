/*
 * libFuzzer target for the C shim, driven as the Swift side drives it: header, then feeds of varying
 * sizes, scanlines through the pyramid writer into memory-backed files. The last input byte picks
 * the chunk size and the writer (the band writer on the caller or writing behind with AIO, or the
 * window writer) and stays
 * in the stream (bytes after EOI are ignored), so plain JPEG seeds decode as they are; the pixel
 * limit is low so the fuzzer explores rather than allocates. It also picks whether truncated scan
 * data is accepted, and whether a multi-scan image's coefficients go to a file (a memfd) with the
 * smallest window, so that every access moves it; scans are limited to 100 (scan floods among the
 * seeds hit the limit). Once the
 * image is complete, the whole input is fed again as trailing bytes: the decoder must drop them
 * (its buffer may not grow). A fourth writer builds a TIFF (issue 26): level 0 transcoded from the
 * coefficients when the JPEG allows it (turned upright by an EXIF orientation when the top bit says),
 * the lower levels encoded, all into memfds.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cjpeg_shim.h"

/* Strips are a tile row wide whatever the height, so width is limited too (a 65500x1 header would
 * otherwise cost a 16 MB strip per level): the point is to explore, not to allocate. */
enum { MAX_PIXELS = 1 << 20, MAX_WIDTH = 2048, TILE = 64, MAX_LEVELS = 16 };

static int pump(cjs_decoder *d, cjs_pyramid *p, int *stage) {
    for (;;) {
        if (*stage == 0) {
            cjs_status s = cjs_decoder_start(d);
            if (s == CJS_NEED_DATA) return 0;
            if (s != CJS_OK) return -1;
            *stage = 1;
        }
        if (*stage == 1) {
            void *rows;
            size_t stride;
            uint32_t capacity, got = 0;
            if (cjs_pyramid_acquire_rows(p, &rows, &stride, &capacity) != CJS_OK) return -1;
            cjs_status s = cjs_decoder_read_rows(d, rows, stride, capacity, &got);
            if (cjs_pyramid_submit_rows(p, got) != CJS_OK) return -1;
            if (s == CJS_NEED_DATA) return 0;
            if (s == CJS_DONE) *stage = 2;
            else if (s != CJS_OK) return -1;
            continue;
        }
        cjs_status s = cjs_decoder_finish(d);
        if (s == CJS_NEED_DATA) return 0;
        return s == CJS_DONE ? 1 : -1;
    }
}

/* A TIFF writer over memfds for the levels, upright (turned by `orientation`, 1-8): level 0 copied
   from the coefficients when the JPEG allows it, else encoded; the pyramid's writer becomes the TIFF's
   level encoders (turned_tiles.c for a turn). 0, or -1. */
static int start_tiff(cjs_decoder *d, const cjs_level *levels, int count, int orientation, cjs_writer_config *writer,
                      cjs_tiff_writer **out, int fds[2]) {
    cjs_tiff_level tiff_levels[MAX_LEVELS];
    void *tables[MAX_LEVELS] = {0};
    int copied = cjs_decoder_transcode_plan(d, TILE, orientation, &tiff_levels[0]) == CJS_OK;
    int status = 0, swaps = orientation >= 5;
    for (int i = copied ? 1 : 0; i < count && status == 0; i++) {
        size_t length = 0;
        int gray = copied && tiff_levels[0].photometric == CJS_PHOTOMETRIC_GRAY;
        if (cjs_jpeg_tables(74, CJS_TABLES_FLATTENED, gray, &tables[i], &length) != CJS_OK) status = -1;
        tiff_levels[i] = (cjs_tiff_level){swaps ? levels[i].height : levels[i].width, swaps ? levels[i].width : levels[i].height,
                                          gray ? CJS_PHOTOMETRIC_GRAY : CJS_PHOTOMETRIC_YCBCR, 2, 2, tables[i], length};
        if (copied && !gray) {
            tiff_levels[i].h_subsampling = tiff_levels[0].h_subsampling;
            tiff_levels[i].v_subsampling = tiff_levels[0].v_subsampling;
        }
    }
    fds[0] = memfd_create("tiff", 0);
    fds[1] = memfd_create("spool", 0);
    cjs_tiff_options options = {.tile_size = TILE, .big_tiff = count & 1};
    if (status == 0 && cjs_tiff_writer_create(fds[0], fds[1], &options, tiff_levels, (uint32_t)count, NULL, out) != CJS_OK)
        status = -1;
    for (int i = 0; i < count; i++) cjs_free(tables[i]);
    if (status != 0) return -1;
    *writer = (cjs_writer_config){.kind = CJS_WRITER_TIFF, .tiff = *out, .tiff_quality = 74, .tiff_tables = CJS_TABLES_FLATTENED,
                                  .tiff_orientation = orientation, .first_level = copied};
    return copied && cjs_decoder_transcode_into(d, *out) != CJS_OK ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const size_t chunks[] = {1, 7, 64, 512, 4096, 65536};
    uint8_t config = data[size - 1];
    size_t chunk = chunks[config % 6];
    int kind = (config >> 3) % 4;
    cjs_decoder *d;
    cjs_decoder_options options = {.warning_limit = 1000, .max_scans = 100, .allow_truncated = (config >> 5) & 1};
    if (cjs_decoder_create(&options, &d) != CJS_OK) return 0;
    cjs_pyramid *p = NULL;
    cjs_level levels[MAX_LEVELS];
    uint32_t progress[MAX_LEVELS];
    int fds[MAX_LEVELS], count = 0, stage = 0;
    cjs_tiff_writer *tiff = NULL;
    int tiff_fds[2] = {-1, -1}, writer_copies = 0;
    size_t offset = 0;
    for (;;) {
        size_t n = size - offset < chunk ? size - offset : chunk;
        if (n && cjs_decoder_feed(d, data + offset, n) != CJS_OK) break;
        offset += n;
        if (offset == size) cjs_decoder_end_input(d);
        if (!p) {
            cjs_header h;
            cjs_status s = cjs_decoder_read_header(d, &h);
            if (s == CJS_NEED_DATA) { if (offset == size) break; continue; }
            if (s != CJS_OK || h.width == 0 || h.height == 0 || (uint64_t)h.width * h.height > MAX_PIXELS || h.width > MAX_WIDTH) break;
            uint32_t w = h.width, hh = h.height;
            for (count = 0; count < MAX_LEVELS; count++) {
                uint32_t columns = (w + TILE - 1) / TILE, rows = (hh + TILE - 1) / TILE;
                fds[count] = memfd_create("level", 0);
                uint32_t x_offset = kind == 3 ? 0 : (columns * TILE - w) * (count & 1);
                levels[count] = (cjs_level){fds[count], w, hh, x_offset, 0, columns, rows};
                if (w <= TILE && hh <= TILE) { count++; break; }
                w = (w + 1) / 2;
                hh = (hh + 1) / 2;
            }
            cjs_writer_config writer = {
                .kind = kind == 2 ? CJS_WRITER_WINDOW : CJS_WRITER_BANDS,
                .band_threading = kind == 1 ? CJS_BANDS_WRITE_BEHIND : CJS_BANDS_ON_CALLER,
            };
            if (((config >> 6) & 1) && cjs_decoder_coefficient_bytes(d) > 0 &&
                cjs_decoder_use_coefficient_file(d, memfd_create("coefficients", 0), 1) != CJS_OK) break;
            /* The top bit turns the TIFF (EXIF 2-8, by the input's length): its upright tiles are coded
               (level 0 from the coefficients) and encoded a band of a tile's rows at a time. */
            int orientation = config & 0x80 ? 2 + (int)(size % 7) : 1;
            if (kind == 3 && start_tiff(d, levels, count, orientation, &writer, &tiff, tiff_fds) != 0) break;
            writer_copies = kind == 3 && writer.first_level == 1;
            int32_t error_number;
            if (cjs_pyramid_create(levels, count, TILE, &writer, progress, &p, &error_number) != CJS_OK) break;
        }
        int r = pump(d, p, &stage);
        if (r != 0) {
            if (r == 1) {
                /* A level 0 being transcoded: its last tiles, or the failure that stopped them. */
                if (tiff && writer_copies && cjs_decoder_transcode_wait(d) != CJS_OK &&
                    cjs_decoder_failure_kind(d) == CJS_FAILURE_NONE)
                    abort();
                if (cjs_pyramid_finish(p) == CJS_OK && tiff) cjs_tiff_writer_finish(tiff);
                size_t held = cjs_decoder_bytes_buffered(d);
                for (int i = 0; offset < size && i < 4; i++) /* not after end_input: that is a state error */
                    if (cjs_decoder_feed(d, data, size) != CJS_OK || cjs_decoder_bytes_buffered(d) != held) abort();
            }
            break;
        }
        if (offset == size) break;
    }
    cjs_pyramid_destroy(p);
    for (int i = 0; i < count; i++) close(fds[i]);
    cjs_decoder_destroy(d); /* before the TIFF writer: its transcoder writes into it */
    cjs_tiff_writer_destroy(tiff);
    for (int i = 0; i < 2; i++) if (tiff_fds[i] >= 0) close(tiff_fds[i]);
    return 0;
}
