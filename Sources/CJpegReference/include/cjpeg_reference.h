/*
 * cjpeg_reference.h: plain whole-image decodes with libjpeg's ordinary, non-suspending API, for the
 * tests and the benchmarks to compare the shim with. Not part of the shipped library.
 */
#ifndef CJPEG_REFERENCE_H
#define CJPEG_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t width;
    uint32_t height;
    uint32_t warnings;
    int32_t failed;
    char message[200];
} cjs_reference_result;

/**
 * Decodes a whole JPEG in memory (jpeg_mem_src, one pass) to RGBA rows, width * 4 bytes each, CMYK
 * and YCCK converted as the shim does. Returns 0, or -1 with result->message. *out is malloc'd
 * (free it with cjs_reference_free); NULL on failure.
 */
int32_t cjs_reference_decode(const void *data, size_t length, void **out, cjs_reference_result *result);
/** The same at libjpeg's DCT scaling 1/denominator (1, 2, 4 or 8), as `djpeg -scale 1/denominator`. */
int32_t cjs_reference_decode_scaled(const void *data, size_t length, uint32_t denominator, void **out,
                                    cjs_reference_result *result);
/** Decodes a file (jpeg_stdio_src) a strip at a time and drops the pixels: djpeg's cost, for
 *  benchmarks. Returns 0, or -1 with result->message. */
int32_t cjs_reference_decode_file_discard(const char *path, cjs_reference_result *result);
/** Decodes a whole PNG in memory with libpng (png_image) to RGBA rows, width * 4 bytes each: for
 *  tests of the exported PNG tiles. Returns 0, or -1 with result->message. */
int32_t cjs_reference_decode_png(const void *data, size_t length, void **out, cjs_reference_result *result);
/** One component's quantized DCT coefficients, as libjpeg reads them (natural order, int16). */
typedef struct {
    uint32_t h, v;
    uint32_t width_in_blocks, height_in_blocks;
    /** width_in_blocks * height_in_blocks blocks of 64, row after row; malloc'd. */
    int16_t *blocks;
    /** The component's quantisation table, natural order. */
    uint16_t quant[64];
} cjs_reference_component;

typedef struct {
    int32_t components;
    cjs_reference_component component[4];
    char message[200];
} cjs_reference_coefficients;

/**
 * Reads a JPEG's coefficients with jpeg_read_coefficients: `tables` (an abbreviated tables-only
 * stream, may be NULL) first, then `data`. Returns 0, or -1 with out->message. Free the blocks with
 * cjs_reference_free_coefficients.
 */
int32_t cjs_reference_read_coefficients(const void *tables, size_t tables_length, const void *data, size_t length,
                                        cjs_reference_coefficients *out);
void cjs_reference_free_coefficients(cjs_reference_coefficients *c);

/** Frees what cjs_reference_decode returned. */
void cjs_reference_free(void *pointer);

/** A SHA-256 (FIPS 180-4) in progress: a plain reference for the tests' pixel hashes. */
typedef struct {
    uint32_t state[8];
    uint64_t length;
    uint8_t block[64];
    uint32_t pending;
} cjs_sha256;
void cjs_sha256_init(cjs_sha256 *context);
void cjs_sha256_update(cjs_sha256 *context, const void *data, size_t count);
/** Hashes the RGB of `pixels` RGBA pixels (alpha left out), as a PPM's samples are. */
void cjs_sha256_update_rgb(cjs_sha256 *context, const uint8_t *rgba, size_t pixels);
/** The digest; the context is used up. */
void cjs_sha256_final(cjs_sha256 *context, uint8_t digest[32]);

#endif
