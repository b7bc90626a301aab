/*
 * cjs_encoder.h: in-memory JPEG encoders (whole images for tests, the demo and resized copies; tiles).
 */
#ifndef CJS_ENCODER_H
#define CJS_ENCODER_H

#include "cjs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cjs_encoder cjs_encoder;

typedef struct {
    uint32_t width;
    uint32_t height;
    /** 1 (grayscale rows, 1 byte a pixel) or 3 (RGBA rows, 4 bytes a pixel, alpha ignored). */
    int32_t components;
    /** 1...100. */
    int32_t quality;
    /** Luma sampling factors: 1x1 is 4:4:4, 2x1 is 4:2:2, 2x2 is 4:2:0. */
    int32_t h_sampling;
    int32_t v_sampling;
    int32_t progressive;
    /** Restart interval in MCU rows (0: none). */
    int32_t restart_rows;
    int32_t optimize_coding;
    /** 1: arithmetic coding (SOF9, or SOF10 when progressive) instead of Huffman. */
    int32_t arithmetic;
} cjs_encoder_options;

cjs_status cjs_encoder_create(const cjs_encoder_options *options, cjs_encoder **out);
void cjs_encoder_destroy(cjs_encoder *e);
/** Writes a marker (e.g. 0xE1 for EXIF) after SOI; call before the first row. */
cjs_status cjs_encoder_write_marker(cjs_encoder *e, int32_t marker, const void *data, size_t length);
/** Writes an ICC profile as APP2 chunks; call before the first row. */
cjs_status cjs_encoder_write_icc(cjs_encoder *e, const void *data, size_t length);
cjs_status cjs_encoder_write_rows(cjs_encoder *e, const void *rows, size_t stride, uint32_t count);
/** Finishes the stream. *out points into the encoder's memory, valid until destroy. */
cjs_status cjs_encoder_finish(cjs_encoder *e, const void **out, size_t *length);
const char *cjs_encoder_message(const cjs_encoder *e);

/* ---- Tile encoder: one small image after another, one compressor reused -------------------- */

/** A JPEG compressor (4:2:0, RGBX rows, 4 bytes a pixel) whose settings are made once and reused from
    image to image: for encoding tiles one after another on one thread. Not thread-safe. */
typedef struct cjs_tile_encoder cjs_tile_encoder;

/** Creates an encoder at `quality` (1...100): YCbCr 4:2:0, or with `gray` non-zero one component
    (the rows' luma). */
cjs_status cjs_tile_encoder_create(int32_t quality, int32_t gray, cjs_tile_encoder **out);
void cjs_tile_encoder_destroy(cjs_tile_encoder *e);
/** Encodes `height` rows of `width` RGBX pixels, `stride` bytes apart. `*out` points into the
    encoder's memory, valid until the next encode or destroy. Calls `jpeg_start_compress`,
    `jpeg_write_scanlines` and `jpeg_finish_compress` under one setjmp guard. */
cjs_status cjs_tile_encoder_encode(cjs_tile_encoder *e, const void *rows, size_t stride, uint32_t width, uint32_t height,
                                   const void **out, size_t *length);
#ifdef __cplusplus
}
#endif
#endif
