/*
 * huffman.h: baseline sequential Huffman coding of 8x8 blocks into a tile's stream (Annex C, F.1.2):
 * a 64-bit bit buffer, 0xFF stuffing, codes derived from BITS and HUFFVAL. Values beyond baseline's
 * ranges (DC differences over 11 bits, AC values over 10), which only corrupt sources give, are
 * clamped. Plain C, no libjpeg call.
 */
#ifndef CJS_HUFFMAN_H
#define CJS_HUFFMAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jpeglib.h>

typedef struct {
    uint32_t code[256];
    uint8_t size[256];
} huffman_codes;

/* For each byte of a block's natural-order non-zero mask, the same coefficients' bits in zigzag order:
   the mask is taken with SIMD compares of the block as it lies, then reordered with 8 lookups. */
typedef struct {
    uint64_t zigzag_bits[8][256];
} huffman_order;

void huffman_order_init(huffman_order *order);

/* One tile's output: its bytes so far, and the bits not yet in a byte. */
typedef struct {
    uint8_t *data;
    size_t length;
    size_t capacity;
    uint64_t bits;
    int count;
    int last_dc[4];
} huffman_stream;

/* Derives codes from BITS (bits[1..16]) and HUFFVAL: 0, or -1 for a table that is not a prefix code. */
int huffman_derive(huffman_codes *codes, const uint8_t bits[17], const uint8_t *values);
/* Makes room for `bytes` more bytes: 0, or -1 out of memory. */
int huffman_reserve(huffman_stream *s, size_t bytes);
/* Starts a tile: `header` (SOI, SOF, SOS) copied in, the DC predictions reset. Room must be reserved. */
void huffman_begin(huffman_stream *s, const uint8_t *header, size_t length);
/* Codes one block (natural order), its DC predicted from component `component`'s last. At most
   HUFFMAN_BLOCK_BYTES bytes must be free. */
void huffman_block(huffman_stream *s, const JCOEF *block, int component, const huffman_codes *dc,
                   const huffman_codes *ac, const huffman_order *order);
/* Codes a block of DC `dc_value` and no AC coefficient (padding). */
void huffman_flat_block(huffman_stream *s, int dc_value, int component, const huffman_codes *dc,
                        const huffman_codes *ac);
/* Ends the tile: the last byte padded with 1 bits, then EOI. At least 16 bytes must be free. */
void huffman_end(huffman_stream *s);

/* The most one block can take: 27 bits of DC and 63 of up to 26 bits, every byte stuffed. */
enum { HUFFMAN_BLOCK_BYTES = 512 };

#endif
