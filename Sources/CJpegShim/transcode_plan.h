/*
 * transcode_plan.h: how level 0's tiles are made from a JPEG's coefficients: which JPEGs can be
 * copied, the tiles' sampling (the source's, reduced by common factors), their tables (the source's
 * quantisation tables, Huffman tables that code every symbol) and the bytes around each tile's data.
 * Built once from the decompressor after its header (transcode_plan.c); read by the transcoder.
 */
#ifndef CJS_TRANSCODE_PLAN_H
#define CJS_TRANSCODE_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jpeglib.h>

enum { PLAN_MAX_COMPONENTS = 3, PLAN_HEADER_MAX = 128 };

typedef struct {
    int id;               /* the tile's component identifier (1, 2, 3) */
    int h, v;             /* the tile's sampling factors */
    int source_v;         /* the source's vertical factor: block rows per iMCU row */
    int quant;            /* the quantisation table (the source's slot, 0...3) */
    int table;            /* Huffman tables: 0 luma, 1 chroma */
    JDIMENSION blocks_per_row; /* libjpeg's array width (width_in_blocks rounded up to h_samp_factor) */
    JDIMENSION block_rows;     /* block rows holding the image (height_in_blocks) */
    JDIMENSION blocks_wide;    /* blocks across the image (width_in_blocks) */
} plan_component;

typedef struct {
    uint8_t bits[17];
    uint8_t values[256];
} plan_huffman;

typedef struct {
    uint32_t width, height, tile_size;
    int orientation;      /* 1: the tiles as stored; 2-8 (EXIF): a turned plan's (transcode_plan_turn) */
    int components;       /* 1 or 3 */
    int photometric;      /* CJS_PHOTOMETRIC_GRAY or CJS_PHOTOMETRIC_YCBCR */
    int max_h, max_v;     /* the tile's MCU is 8 * max_h x 8 * max_v pixels */
    int sub_rows;         /* tile MCU rows in one of libjpeg's iMCU rows */
    JDIMENSION imcu_rows; /* libjpeg's total_iMCU_rows */
    plan_component component[PLAN_MAX_COMPONENTS];
    uint16_t quant[NUM_QUANT_TBLS][DCTSIZE2]; /* natural order */
    int quant_used[NUM_QUANT_TBLS];
    int extended;         /* a quantiser over 255: 16-bit tables, SOF1 */
    plan_huffman dc[2], ac[2];
    /* Whether the Huffman tables are derived from the source's (else libjpeg's standard ones). */
    int source_tables;
    /* SOI, SOF, SOS of every tile (its data follows; then EOI). */
    uint8_t header[PLAN_HEADER_MAX];
    size_t header_length;
    /* JPEGTables: SOI, DQT, DHT, EOI. */
    uint8_t *tables;
    size_t tables_length;
} transcode_plan;

/*
 * Fills `plan` for `cinfo` (after jpeg_read_header) and tiles of `tile_size`: 0, or -1 with a reason
 * in `reason` when the coefficients cannot make TIFF JPEG tiles. The standard Huffman tables come from
 * a compressor of libjpeg's (jpeg_set_defaults), under a setjmp of its own. Free with plan_free.
 */
int transcode_plan_make(j_decompress_ptr cinfo, uint32_t tile_size, transcode_plan *plan, char *reason,
                        size_t capacity);
void transcode_plan_free(transcode_plan *plan);

/* The EXIF orientation `orientation` (1-8) as the moves that make the upright image from the stored
   one: transpose (swap x and y), then read stored x (flip_x) or y (flip_y) from the far edge. */
typedef struct {
    int transpose, flip_x, flip_y;
} plan_turn;
plan_turn plan_turn_of(int orientation);

/*
 * Fills `turned` for tiles of the upright image of `source` (a plan of the stored JPEG) turned by
 * EXIF `orientation` 2-8: sizes and sampling swapped and quantisation tables transposed for a
 * transpose, the same Huffman tables. 0, or -1 with a reason when the turn cannot be lossless: a
 * flipped side that is not a whole number of MCUs (its partial blocks would land inside the image),
 * or a transposed sampling TIFF cannot state (4:2:2). Free with transcode_plan_free.
 */
int transcode_plan_turn(const transcode_plan *source, int orientation, transcode_plan *turned, char *reason,
                        size_t capacity);

/* The natural-order index of each zigzag position (what libjpeg calls jpeg_natural_order). */
extern const uint8_t plan_natural_order[DCTSIZE2];

#endif
