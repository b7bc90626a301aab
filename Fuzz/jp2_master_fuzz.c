/*
 * libFuzzer target for the JPEG 2000 master decoder (CJp2Decoder), driven as TileCore's JPEG2000Decoder
 * drives it for a master's file: the input's bytes (all of them: `complete`) read from memory, the
 * header, the ICC profile, then rows read a few at a time. The last input byte picks the band budget
 * (1 KiB to 32 MiB, so bands of a single row get explored too) and the rows asked for per read (it
 * stays in the data: a trailing byte after the codestream is ignored). Images over a small pixel and
 * width limit stop after the header: the point is to explore, not to allocate.
 */
#include <stdint.h>
#include <stdlib.h>

#include "cjp2_decoder.h"

enum { MAX_PIXELS = 1 << 20, MAX_WIDTH = 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    uint8_t pick = data[size - 1];
    uint64_t budget = (uint64_t)1 << (10 + (pick & 15));
    uint32_t per_read = 1 + (pick >> 4);
    volatile int32_t signature = cjp2_is_signature(data, size);
    (void)signature;
    cjp2_decoder *d;
    char message[256];
    /* Two threads for every other length: OpenJPEG's workers, where its assertions are not caught
       (jp2_guard.c), must never decode HT code-blocks, however the HT style is hidden. */
    uint32_t threads = size % 2 ? 2 : 1;
    if (cjp2_decoder_open(-1, data, size, 1 /* complete */, threads, budget, &d, message, sizeof message) != CMASTER_OK)
        return 0;
    cjp2_header h;
    cjp2_decoder_header(d, &h);
    /* The SIZ marker's tiles were checked before OpenJPEG allocated by them: at most one per 14 bytes. */
    if ((uint64_t)h.tiles_across * h.tiles_down > size / 14 + 1) abort();
    const void *icc;
    size_t icc_length;
    cjp2_decoder_icc_profile(d, &icc, &icc_length);
    if (icc_length > 0) {
        volatile uint8_t first = ((const uint8_t *)icc)[0], last = ((const uint8_t *)icc)[icc_length - 1];
        (void)first, (void)last;
    }
    if (h.width == 0 || h.width > MAX_WIDTH || (uint64_t)h.width * h.height > MAX_PIXELS) goto done;
    uint8_t *rows = malloc((size_t)h.width * 4 * per_read);
    if (!rows) goto done;
    uint32_t total = 0;
    for (;;) {
        uint32_t got = 0;
        cmaster_status s = cjp2_decoder_read_rows(d, rows, (size_t)h.width * 4, per_read, &got);
        if (got > per_read) abort();
        total += got;
        if (cjp2_decoder_rows_read(d) != total) abort();
        if (s == CMASTER_DONE) {
            if (total != h.height) abort(); /* done means every row was given */
            break;
        }
        if (s != CMASTER_OK) break;
    }
    /* A band holds at most the budget's bytes of samples, or one row when a row is more, or a 64th of
       a tile's rows when that is more; for HTJ2K, whole tiles: one tile column's window of a row of
       tiles (cjp2_decoder.h). */
    uint64_t row_bytes = (uint64_t)h.width * (uint64_t)h.components * 4;
    uint64_t tile_rows = h.tile_height && h.tile_height < h.height ? h.tile_height : h.height;
    uint64_t tile_columns = h.tile_width && h.tile_width < h.width ? h.tile_width : h.width;
    uint64_t least = h.is_htj2k ? tile_rows * tile_columns * (uint64_t)h.components * 4
                                : (tile_rows + 63) / 64 * row_bytes;
    uint64_t most = budget > row_bytes ? budget : row_bytes;
    if (cjp2_decoder_band_bytes(d) > (most > least ? most : least)) abort();
    free(rows);
done:
    cjp2_decoder_copy_message(d, message, sizeof message);
    cjp2_decoder_destroy(d);
    return 0;
}
