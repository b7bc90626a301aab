/*
 * cweb_encoders.h: WebP (libwebp) and AVIF (libavif) encoders of RGBA pixels, for the answers a
 * browser asks for in those formats. One call encodes one image; nothing is kept between calls.
 */
#ifndef CWEB_ENCODERS_H
#define CWEB_ENCODERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CWEB_OK = 0,
    /** A size, stride or setting the format cannot take (WebP: at most 16383 pixels a side). */
    CWEB_ERR_ARGUMENT = -1,
    /** Memory ran out. */
    CWEB_ERR_MEMORY = -2,
    /** The library refused or failed; `detail` (when given) holds its own code. */
    CWEB_ERR_ENCODER = -3,
    /** The caller's cancellation check said stop (WebP only: libavif 0.11 has no way to stop). */
    CWEB_ERR_CANCELLED = -4,
} cweb_status;

/** A cancellation check: non-zero stops the encode. `context` is the caller's. */
typedef int32_t (*cweb_cancelled)(void *context);

/** The largest side a WebP image can have. */
#define CWEB_WEBP_MAX_SIDE 16383

/**
 * Encodes `height` rows of `width` RGBA pixels (4 bytes a pixel, `stride` bytes apart) as WebP:
 * lossy at `quality` (1...100), or lossless when `lossless` is non-zero (`quality` then sets the
 * effort spent on size). `method` is libwebp's speed and size trade-off, 0 (fastest) to 6. With
 * `sharp_yuv` non-zero a lossy encode turns RGB into YUV 4:2:0 with libwebp's iterative ("sharp")
 * conversion, which keeps colour edges and fine colour detail better than averaging, for some time. With
 * `keep_alpha` zero the alpha channel is not stored (the image is opaque). `icc` (may be NULL), a
 * colour profile carried in an `ICCP` chunk (libwebpmux). `cancelled` (may be NULL) is asked as the
 * encode progresses. On success `*out` is a buffer of `*length` bytes the caller frees with
 * `cweb_free`. `detail` may be NULL.
 */
cweb_status cweb_webp_encode(const uint8_t *rgba, size_t stride, uint32_t width, uint32_t height, int32_t quality,
                             int32_t lossless, int32_t method, int32_t sharp_yuv, int32_t keep_alpha, const void *icc,
                             size_t icc_length, cweb_cancelled cancelled, void *context, void **out, size_t *length, int32_t *detail);

/**
 * Encodes `height` rows of `width` RGBA pixels as AVIF (AV1 through libaom, 8 bits, full range): YUV
 * 4:2:0, or 4:4:4 when `full_chroma` is non-zero (AV1's High profile, outside AVIF's baseline profile),
 * or 4:0:0 (luma only) when `gray` is non-zero, at `quality` (1...100, mapped onto AV1's
 * quantisers 63...0), with libavif's `speed` (0 slowest ... 10 fastest) on one thread. At most
 * 2^32 - 1 bytes of rows (libavif 0.11 indexes them in 32 bits). It cannot be stopped once started. With `keep_alpha`
 * non-zero the alpha channel is stored too, losslessly. `icc` (may be NULL), a colour profile
 * carried in the file's `colr` box. `*out` as for `cweb_webp_encode`.
 */
cweb_status cweb_avif_encode(const uint8_t *rgba, size_t stride, uint32_t width, uint32_t height, int32_t quality,
                             int32_t speed, int32_t full_chroma, int32_t keep_alpha, int32_t gray, const void *icc, size_t icc_length,
                             void **out, size_t *length, int32_t *detail);

/** Frees a buffer the encoders returned. */
void cweb_free(void *buffer);

#ifdef __cplusplus
}
#endif

#endif
