/*
 * libFuzzer target for the PNG decoder (CPngDecoder), driven as TileCore's PNGDecoder drives it: bytes
 * fed in chunks, the header, rows read a few at a time into a buffer, then the end. The last input
 * byte picks the chunk size and the rows asked for per read, and stays in the stream (bytes after
 * IEND are ignored), so plain PNG seeds decode as they are. Images over a small pixel and width limit
 * stop after the header: the point is to explore, not to allocate.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpng_decoder.h"

enum { MAX_PIXELS = 1 << 20, MAX_WIDTH = 4096 };

/* Reads rows while it can: 1 when the image is complete, 0 when more bytes are needed, -1 on an error
   or an image too large to explore. */
static int pump(cpng_decoder *d, int *have_header, cpng_header *h, uint8_t **rows, uint32_t per_read) {
    if (!*have_header) {
        cmaster_status s = cpng_decoder_read_header(d, h);
        if (s == CMASTER_NEED_DATA) return 0;
        if (s != CMASTER_OK) return -1;
        if (h->width == 0 || h->width > MAX_WIDTH || (uint64_t)h->width * h->height > MAX_PIXELS) return -1;
        *rows = malloc((size_t)h->width * 4 * per_read);
        if (!*rows) return -1;
        *have_header = 1;
    }
    for (;;) {
        uint32_t got = 0;
        cmaster_status s = cpng_decoder_read_rows(d, *rows, (size_t)h->width * 4, per_read, &got);
        if (got > per_read) abort();
        if (s == CMASTER_OK) continue;
        if (s == CMASTER_NEED_DATA) return 0;
        return s == CMASTER_DONE ? 1 : -1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t pick = data[size - 1];
    size_t chunk = (size_t)1 << (pick & 15);
    uint32_t per_read = 1 + (pick >> 4);
    cpng_decoder *d;
    if (cpng_decoder_create(&d) != CMASTER_OK) return 0;
    cpng_decoder_set_spool_directory(d, "/tmp"); /* interlaced images too, their passes on disk */
    cpng_header h;
    int have_header = 0, state = 0;
    uint8_t *rows = NULL;
    for (size_t at = 0; at < size && state == 0; at += chunk) {
        size_t n = size - at < chunk ? size - at : chunk;
        if (cpng_decoder_feed(d, data + at, n) != CMASTER_OK) break;
        state = pump(d, &have_header, &h, &rows, per_read);
    }
    if (state == 0) {
        cpng_decoder_end_input(d);
        state = pump(d, &have_header, &h, &rows, per_read);
        if (state == 0) abort(); /* after the end of the input, a read must finish or fail */
    }
    char message[256];
    cpng_decoder_copy_message(d, message, sizeof message);
    free(rows);
    cpng_decoder_destroy(d);
    return 0;
}
