/*
 * cjs_decoder.h: the push decoder (bytes in, RGBX rows out) over libjpeg's suspending source.
 */
#ifndef CJS_DECODER_H
#define CJS_DECODER_H

#include "cjs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cjs_decoder cjs_decoder;

/** Block-scans allowed whatever max_block_passes says (small images may have many scans). */
#define CJS_FREE_BLOCK_SCANS (1ull << 24)

typedef struct {
    /** Warnings (corrupt data) allowed before the decode fails; 0 means no limit. */
    uint32_t warning_limit;
    /** Scans allowed (libjpeg-turbo's djpeg -maxscans); 0 means no limit. */
    uint32_t max_scans;
    /**
     * How many times over the scans may cover the image's blocks (each scan counts the blocks of its
     * components), past the first CJS_FREE_BLOCK_SCANS; 0 means no limit. Every scan costs a pass
     * over its components' blocks however few bytes code it: hundreds of empty scans of a large image
     * cost minutes. Real progressive encoders cover each component 4 to 10 times.
     */
    uint32_t max_block_passes;
    /**
     * 1: scan data that ends early is a warning and libjpeg fills in the rest, as djpeg does.
     * 0: it fails the decode at the first sign (CJS_FAILURE_TRUNCATED), before anything more is decoded.
     */
    int32_t allow_truncated;
} cjs_decoder_options;

typedef struct {
    uint32_t width;
    uint32_t height;
    /** Components in the JPEG stream (1, 3 or 4). */
    int32_t components;
    /** A cjs_color_space value. */
    int32_t color_space;
    int32_t bits_per_sample;
    int32_t is_progressive;
    int32_t is_arithmetic;
} cjs_header;

/** Creates a decoder; `options` may be NULL. The caller owns *out and frees it with destroy. */
cjs_status cjs_decoder_create(const cjs_decoder_options *options, cjs_decoder **out);
void cjs_decoder_destroy(cjs_decoder *d);

/**
 * Appends `length` bytes. The bytes are copied; `bytes` need only live for the call.
 * Bytes libjpeg has consumed are dropped first (the buffer is compacted on every feed), so the
 * decoder holds only what it has not used yet; the buffer grows geometrically, so feeding is linear
 * in the input's size. Once the end-of-image marker has been read (cjs_decoder_finish returned
 * CJS_DONE), bytes are counted (cjs_decoder_bytes_after_end) and dropped.
 */
cjs_status cjs_decoder_feed(cjs_decoder *d, const void *bytes, size_t length);
/** Says that no more bytes will come: a stream that ends before its image does is truncated. */
cjs_status cjs_decoder_end_input(cjs_decoder *d);

/**
 * Asks libjpeg for DCT-domain scaling by 1/denominator (1, 2, 4 or 8): most coefficients are never
 * inverse-transformed. Call after the header, before start. *out_width, *out_height get the output
 * size (jpeg_calc_output_dimensions).
 */
cjs_status cjs_decoder_set_scale(cjs_decoder *d, uint32_t denominator, uint32_t *out_width, uint32_t *out_height);

/** Reads the header (jpeg_read_header). CJS_NEED_DATA until enough bytes are in; then CJS_OK. */
cjs_status cjs_decoder_read_header(cjs_decoder *d, cjs_header *out);
/**
 * Starts decompression to 4-byte pixels (jpeg_start_decompress). CJS_NEED_DATA when libjpeg
 * suspends (a progressive image is read whole here); call again after feeding more bytes.
 */
cjs_status cjs_decoder_start(cjs_decoder *d);
/**
 * Reads up to `max_rows` scanlines (jpeg_read_scanlines) as RGBA (alpha 255) into `dst`, rows
 * `stride` bytes apart (stride >= width * 4). *out_rows says how many were written. Returns
 * CJS_OK when max_rows were read, CJS_NEED_DATA when libjpeg suspended, CJS_DONE when the last
 * scanline has been read. CMYK and YCCK images are converted to RGB here.
 */
cjs_status cjs_decoder_read_rows(cjs_decoder *d, void *dst, size_t stride, uint32_t max_rows,
                                 uint32_t *out_rows);
/** Reads to the end of the stream (jpeg_finish_decompress): CJS_NEED_DATA or CJS_DONE. */
cjs_status cjs_decoder_finish(cjs_decoder *d);

/** Scanlines read so far. */
uint32_t cjs_decoder_rows_read(const cjs_decoder *d);
/** Compressed bytes held and not yet consumed by libjpeg. */
size_t cjs_decoder_bytes_buffered(const cjs_decoder *d);
/** Corrupt-data warnings seen so far (including the premature end of the stream). */
uint32_t cjs_decoder_warning_count(const cjs_decoder *d);
/** Bytes fed after the end of the image, counted and dropped. */
uint64_t cjs_decoder_bytes_after_end(const cjs_decoder *d);
/** 1 when scan data ended early and libjpeg filled in the rest (only with allow_truncated). */
int32_t cjs_decoder_is_truncated(const cjs_decoder *d);
/** The last error or warning message; owned by the decoder, valid until the next call. */
const char *cjs_decoder_message(const cjs_decoder *d);
/** The libjpeg message code of the last error (or 0). */
int32_t cjs_decoder_message_code(const cjs_decoder *d);
/** A cjs_failure_kind for the last error. */
int32_t cjs_decoder_failure_kind(const cjs_decoder *d);
/** The errno of a CJS_FAILURE_IO failure, else 0. */
int32_t cjs_decoder_errno(const cjs_decoder *d);
/**
 * Asks the decoder to stop: the decode in progress (on another thread) fails as CJS_FAILURE_STOPPED
 * at its next iMCU row of input, before its next scan, or at the next call. The one call that may
 * be made from any thread.
 */
void cjs_decoder_request_stop(cjs_decoder *d);

/**
 * Bytes of the whole-image coefficient arrays this image needs (128 per 8x8 block, as libjpeg sizes
 * them), or 0 when it has a single scan and libjpeg decodes it row by row without them. A progressive
 * or multi-scan JPEG is read whole into these arrays before its first row comes out. Call after the
 * header has been read.
 */
uint64_t cjs_decoder_coefficient_bytes(const cjs_decoder *d);
/**
 * Keeps the coefficient arrays in the file `fd` (opened read-write, empty, for example created
 * exclusively and unlinked) instead of memory, with a window of block rows per component in memory:
 * about `window_bytes` each (0: 1 MiB), never fewer than twice the rows libjpeg reads at once. Takes ownership of `fd` in every case: the decoder closes it once the image is decoded,
 * when it fails, or on destroy. Call after the header, before cjs_decoder_start. A full disk fails
 * the decode as CJS_FAILURE_IO with the errno.
 */
cjs_status cjs_decoder_use_coefficient_file(cjs_decoder *d, int fd, size_t window_bytes);
/** Bytes the coefficient file holds now (0 once closed, or when there is none). */
uint64_t cjs_decoder_coefficient_file_bytes(const cjs_decoder *d);
#ifdef __cplusplus
}
#endif
#endif
