/* huffman.c: baseline Huffman coding of blocks into a tile's stream (huffman.h). */
#include <stdlib.h>
#include <string.h>

#include "huffman.h"
#include "transcode_plan.h"

int huffman_derive(huffman_codes *codes, const uint8_t bits[17], const uint8_t *values) {
    memset(codes->size, 0, sizeof codes->size);
    uint32_t code = 0;
    int k = 0;
    for (int length = 1; length <= 16; length++) {
        for (int i = 0; i < bits[length]; i++) {
            if (k >= 256) return -1;
            codes->code[values[k]] = code++;
            codes->size[values[k]] = (uint8_t)length;
            k++;
        }
        if (code > (1u << length)) return -1;
        code <<= 1;
    }
    return 0;
}

int huffman_reserve(huffman_stream *s, size_t bytes) {
    if (s->capacity - s->length >= bytes) return 0;
    size_t capacity = s->capacity ? s->capacity : 16384;
    while (capacity - s->length < bytes) capacity *= 2;
    uint8_t *data = realloc(s->data, capacity);
    if (!data) return -1;
    s->data = data;
    s->capacity = capacity;
    return 0;
}

void huffman_begin(huffman_stream *s, const uint8_t *header, size_t length) {
    memcpy(s->data, header, length);
    s->length = length;
    s->bits = 0;
    s->count = 0;
    memset(s->last_dc, 0, sizeof s->last_dc);
}

/* Appends `size` bits (size <= 32), whole bytes out, each 0xFF followed by a stuffed 0. */
static inline void put(huffman_stream *s, uint32_t value, int size, uint8_t **out) {
    s->bits = (s->bits << size) | value;
    s->count += size;
    while (s->count >= 8) {
        s->count -= 8;
        uint8_t byte = (uint8_t)(s->bits >> s->count);
        *(*out)++ = byte;
        if (byte == 0xFF) *(*out)++ = 0;
    }
}

static inline int magnitude_bits(unsigned value) { return value ? 32 - __builtin_clz(value) : 0; }

/* A DC difference: its category's code, then its bits (one's complement when negative). */
static inline void put_dc(huffman_stream *s, int value, int component, const huffman_codes *dc, uint8_t **out) {
    int diff = value - s->last_dc[component];
    if (diff > 2047) diff = 2047; /* baseline's 11 bits: only a corrupt source goes past */
    if (diff < -2047) diff = -2047;
    s->last_dc[component] += diff;
    unsigned magnitude = (unsigned)(diff < 0 ? -diff : diff);
    int n = magnitude_bits(magnitude);
    uint32_t extra = (uint32_t)(diff < 0 ? diff - 1 : diff) & ((1u << n) - 1);
    put(s, dc->code[n] << n | extra, dc->size[n] + n, out);
}

void huffman_block(huffman_stream *s, const JCOEF *block, int component, const huffman_codes *dc,
                   const huffman_codes *ac) {
    uint8_t *out = s->data + s->length;
    put_dc(s, block[0], component, dc, &out);
    JCOEF zigzag[DCTSIZE2];
    uint64_t nonzero = 0;
    for (int k = 1; k < DCTSIZE2; k++) {
        JCOEF v = block[plan_natural_order[k]];
        zigzag[k] = v;
        nonzero |= (uint64_t)(v != 0) << k;
    }
    int last = 0;
    while (nonzero) {
        int k = __builtin_ctzll(nonzero);
        nonzero &= nonzero - 1;
        int run = k - last - 1;
        last = k;
        while (run > 15) {
            put(s, ac->code[0xF0], ac->size[0xF0], &out);
            run -= 16;
        }
        int v = zigzag[k];
        if (v > 1023) v = 1023; /* baseline's 10 bits: only a corrupt source goes past */
        if (v < -1023) v = -1023;
        unsigned magnitude = (unsigned)(v < 0 ? -v : v);
        int n = magnitude_bits(magnitude);
        uint32_t extra = (uint32_t)(v < 0 ? v - 1 : v) & ((1u << n) - 1);
        int symbol = run << 4 | n;
        put(s, ac->code[symbol] << n | extra, ac->size[symbol] + n, &out);
    }
    if (last != DCTSIZE2 - 1) put(s, ac->code[0], ac->size[0], &out);
    s->length = (size_t)(out - s->data);
}

void huffman_flat_block(huffman_stream *s, int dc_value, int component, const huffman_codes *dc,
                        const huffman_codes *ac) {
    uint8_t *out = s->data + s->length;
    put_dc(s, dc_value, component, dc, &out);
    put(s, ac->code[0], ac->size[0], &out);
    s->length = (size_t)(out - s->data);
}

void huffman_end(huffman_stream *s) {
    uint8_t *out = s->data + s->length;
    if (s->count > 0) put(s, (1u << (8 - s->count)) - 1, 8 - s->count, &out);
    *out++ = 0xFF;
    *out++ = 0xD9;
    s->length = (size_t)(out - s->data);
}
