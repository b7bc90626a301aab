/* huffman.c: baseline Huffman coding of blocks into a tile's stream (huffman.h). */
#include <stdlib.h>
#include <string.h>

#include "huffman.h"
#include "transcode_plan.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/* The bits not yet in a byte and where the next byte goes: a local copy of a stream's, so that the
   compiler keeps it in registers (stores through the output pointer may alias anything in memory). */
typedef struct {
    uint64_t bits;
    int count;
    uint8_t *out;
} writer;

/*
 * Appends `size` bits (size <= 32; fewer than 32 bits were pending). Whole 32-bit words go out at
 * once when none of their bytes is 0xFF (the common case); else byte by byte, each 0xFF followed by a
 * stuffed 0 (F.1.2.3).
 */
static inline void put(writer *w, uint32_t value, int size) {
    w->bits = (w->bits << size) | value;
    w->count += size;
    if (w->count < 32) return;
    w->count -= 32;
    uint32_t word = (uint32_t)(w->bits >> w->count);
    uint32_t inverted = ~word;
    if (((inverted - 0x01010101u) & ~inverted & 0x80808080u) == 0) { /* no byte is 0xFF */
        uint32_t big = __builtin_bswap32(word);
        memcpy(w->out, &big, 4);
        w->out += 4;
        return;
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
        uint8_t byte = (uint8_t)(word >> shift);
        *w->out++ = byte;
        if (byte == 0xFF) *w->out++ = 0;
    }
}

/* Whole bytes out of what is pending (fewer than 8 bits stay), stuffed. */
static inline void drain(writer *w) {
    while (w->count >= 8) {
        w->count -= 8;
        uint8_t byte = (uint8_t)(w->bits >> w->count);
        *w->out++ = byte;
        if (byte == 0xFF) *w->out++ = 0;
    }
}

static inline writer open_writer(const huffman_stream *s) {
    return (writer){.bits = s->bits, .count = s->count, .out = s->data + s->length};
}

static inline void close_writer(huffman_stream *s, const writer *w) {
    s->bits = w->bits;
    s->count = w->count;
    s->length = (size_t)(w->out - s->data);
}

static inline int magnitude_bits(unsigned value) { return value ? 32 - __builtin_clz(value) : 0; }

/* A DC difference: its category's code, then its bits (one's complement when negative). */
static inline void put_dc(writer *w, int *last_dc, int value, const huffman_codes *dc) {
    int diff = value - *last_dc;
    if (diff > 2047) diff = 2047; /* baseline's 11 bits: only a corrupt source goes past */
    if (diff < -2047) diff = -2047;
    *last_dc += diff;
    unsigned magnitude = (unsigned)(diff < 0 ? -diff : diff);
    int n = magnitude_bits(magnitude);
    uint32_t extra = (uint32_t)(diff < 0 ? diff - 1 : diff) & ((1u << n) - 1);
    put(w, dc->code[n] << n | extra, dc->size[n] + n);
}

void huffman_order_init(huffman_order *order) {
    int zigzag_of[DCTSIZE2];
    for (int k = 0; k < DCTSIZE2; k++) zigzag_of[plan_natural_order[k]] = k;
    for (int byte = 0; byte < 8; byte++)
        for (int value = 0; value < 256; value++) {
            uint64_t bits = 0;
            for (int b = 0; b < 8; b++)
                if (value & (1 << b)) bits |= (uint64_t)1 << zigzag_of[byte * 8 + b];
            order->zigzag_bits[byte][value] = bits;
        }
}

/* A bit per non-zero coefficient of the block, in zigzag order, the DC's left out. */
static inline uint64_t nonzero_zigzag(const JCOEF *block, const huffman_order *order) {
    uint64_t natural = 0;
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    for (int i = 0; i < 4; i++) {
        __m128i low = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(const void *)(block + 16 * i)), zero);
        __m128i high = _mm_cmpeq_epi16(_mm_loadu_si128((const __m128i *)(const void *)(block + 16 * i + 8)), zero);
        natural |= (uint64_t)(~(unsigned)_mm_movemask_epi8(_mm_packs_epi16(low, high)) & 0xFFFFu) << (16 * i);
    }
#else
    for (int k = 0; k < DCTSIZE2; k++) natural |= (uint64_t)(block[k] != 0) << k;
#endif
    uint64_t zigzag = 0;
    for (int byte = 0; byte < 8; byte++) zigzag |= order->zigzag_bits[byte][(natural >> (8 * byte)) & 0xFF];
    return zigzag & ~(uint64_t)1;
}

void huffman_block(huffman_stream *s, const JCOEF *block, int component, const huffman_codes *dc,
                   const huffman_codes *ac, const huffman_order *order) {
    writer w = open_writer(s);
    int last_dc = s->last_dc[component];
    put_dc(&w, &last_dc, block[0], dc);
    s->last_dc[component] = last_dc;
    uint64_t nonzero = nonzero_zigzag(block, order);
    int last = 0;
    while (nonzero) {
        int k = __builtin_ctzll(nonzero);
        nonzero &= nonzero - 1;
        int run = k - last - 1;
        last = k;
        while (run > 15) {
            put(&w, ac->code[0xF0], ac->size[0xF0]);
            run -= 16;
        }
        int v = block[plan_natural_order[k]];
        if (v > 1023) v = 1023; /* baseline's 10 bits: only a corrupt source goes past */
        if (v < -1023) v = -1023;
        unsigned magnitude = (unsigned)(v < 0 ? -v : v);
        int n = magnitude_bits(magnitude);
        uint32_t extra = (uint32_t)(v < 0 ? v - 1 : v) & ((1u << n) - 1);
        int symbol = run << 4 | n;
        put(&w, ac->code[symbol] << n | extra, ac->size[symbol] + n);
    }
    if (last != DCTSIZE2 - 1) put(&w, ac->code[0], ac->size[0]);
    close_writer(s, &w);
}

void huffman_flat_block(huffman_stream *s, int dc_value, int component, const huffman_codes *dc,
                        const huffman_codes *ac) {
    writer w = open_writer(s);
    int last_dc = s->last_dc[component];
    put_dc(&w, &last_dc, dc_value, dc);
    s->last_dc[component] = last_dc;
    put(&w, ac->code[0], ac->size[0]);
    close_writer(s, &w);
}

void huffman_end(huffman_stream *s) {
    writer w = open_writer(s);
    drain(&w);
    if (w.count > 0) {
        put(&w, (1u << (8 - w.count)) - 1, 8 - w.count);
        drain(&w);
    }
    *w.out++ = 0xFF;
    *w.out++ = 0xD9;
    close_writer(s, &w);
}
