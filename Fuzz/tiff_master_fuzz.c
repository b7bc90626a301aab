/*
 * libFuzzer target for the TIFF master decoder (CTiffDecoder), driven as TileCore's TIFFDecoder drives
 * it for bytes pushed in: fed in chunks to its spool file, the end of the input, the header, then rows
 * read a few at a time. The last input byte picks the chunk size and the rows asked for per read (it
 * stays in the file: TIFFs are read by offsets, so a trailing byte changes nothing). Images over a
 * small pixel and width limit stop after the header: the point is to explore, not to allocate.
 */
#include <stdint.h>
#include <stdlib.h>

#include "ctiff_decoder.h"

enum { MAX_PIXELS = 1 << 20, MAX_WIDTH = 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t pick = data[size - 1];
    size_t chunk = (size_t)1 << (pick & 15);
    uint32_t per_read = 1 + (pick >> 4);
    ctiff_decoder *d;
    int number = 0;
    if (ctiff_decoder_create(NULL, "/tmp", 0, &d, &number) != CMASTER_OK) return 0;
    for (size_t at = 0; at < size; at += chunk) {
        size_t n = size - at < chunk ? size - at : chunk;
        if (ctiff_decoder_feed(d, data + at, n) != CMASTER_OK) goto done;
    }
    ctiff_header h;
    if (ctiff_decoder_read_header(d, &h) != CMASTER_NEED_DATA) abort(); /* nothing is read before the end */
    ctiff_decoder_end_input(d);
    if (ctiff_decoder_read_header(d, &h) != CMASTER_OK) goto done;
    if (h.width == 0 || h.width > MAX_WIDTH || (uint64_t)h.width * h.height > MAX_PIXELS) goto done;
    uint8_t *rows = malloc((size_t)h.width * 4 * per_read);
    if (!rows) goto done;
    uint32_t total = 0;
    for (;;) {
        uint32_t got = 0;
        cmaster_status s = ctiff_decoder_read_rows(d, rows, (size_t)h.width * 4, per_read, &got);
        if (got > per_read) abort();
        total += got;
        if (s == CMASTER_DONE) {
            if (total != h.height) abort(); /* done means every row was given */
            break;
        }
        if (s != CMASTER_OK) break;
    }
    free(rows);
done:;
    char message[256];
    ctiff_decoder_copy_message(d, message, sizeof message);
    ctiff_decoder_destroy(d);
    return 0;
}
