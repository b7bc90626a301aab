/*
 * avif_encode.c: RGBA pixels to AVIF through libavif (its aom encoder), on the caller's thread.
 */
#include "cweb_encoders.h"

#include <avif/avif.h>
#include <stdlib.h>
#include <string.h>

/* Quality 1...100 onto AV1's quantisers 63 (worst) ... 0 (best), as libavif 1.0 maps its own. */
static int quantizer(int32_t quality) { return ((100 - quality) * AVIF_QUANTIZER_WORST_QUALITY + 50) / 100; }

static cweb_status failed(avifResult result, int32_t *detail) {
    if (detail) *detail = (int32_t)result;
    return result == AVIF_RESULT_OUT_OF_MEMORY ? CWEB_ERR_MEMORY : CWEB_ERR_ENCODER;
}

cweb_status cweb_avif_encode(const uint8_t *rgba, size_t stride, uint32_t width, uint32_t height, int32_t quality,
                             int32_t speed, int32_t full_chroma, int32_t keep_alpha, int32_t gray, const void *icc, size_t icc_length,
                             void **out, size_t *length, int32_t *detail) {
    if (detail) *detail = 0;
    if (!rgba || !out || !length || width == 0 || height == 0 || width > 65536 || height > 65536 ||
        stride < (size_t)width * 4 || stride > UINT32_MAX || (uint64_t)stride * height > UINT32_MAX || quality < 1 ||
        quality > 100 || speed < 0 || speed > 10)
        return CWEB_ERR_ARGUMENT;
    *out = NULL;
    *length = 0;

    avifImage *image = avifImageCreate(width, height, 8, gray          ? AVIF_PIXEL_FORMAT_YUV400
                                                                 : full_chroma ? AVIF_PIXEL_FORMAT_YUV444
                                                                               : AVIF_PIXEL_FORMAT_YUV420);
    if (!image) return CWEB_ERR_MEMORY;
    image->yuvRange = AVIF_RANGE_FULL;
    /* Said, not left to the decoder to guess (avifenc's choice for an sRGB PNG): BT.601 YUV, and sRGB
       unless a profile says otherwise. */
    image->matrixCoefficients = AVIF_MATRIX_COEFFICIENTS_BT601;
    if (icc && icc_length > 0) {
#if AVIF_VERSION_MAJOR >= 1
        avifResult set = avifImageSetProfileICC(image, icc, icc_length);
        if (set != AVIF_RESULT_OK) {
            avifImageDestroy(image);
            return failed(set, detail);
        }
#else
        avifImageSetProfileICC(image, icc, icc_length);
#endif
    } else {
        image->colorPrimaries = AVIF_COLOR_PRIMARIES_BT709;
        image->transferCharacteristics = AVIF_TRANSFER_CHARACTERISTICS_SRGB;
    }
    avifRGBImage rgb;
    avifRGBImageSetDefaults(&rgb, image);
    rgb.format = AVIF_RGB_FORMAT_RGBA;
    rgb.depth = 8;
    rgb.ignoreAlpha = keep_alpha ? AVIF_FALSE : AVIF_TRUE;
    rgb.pixels = (uint8_t *)rgba; /* read only: avifImageRGBToYUV does not write it */
    rgb.rowBytes = (uint32_t)stride;
    avifResult result = avifImageRGBToYUV(image, &rgb);
    if (result != AVIF_RESULT_OK) {
        avifImageDestroy(image);
        return failed(result, detail);
    }

    avifEncoder *encoder = avifEncoderCreate();
    if (!encoder) {
        avifImageDestroy(image);
        return CWEB_ERR_MEMORY;
    }
    /* libaom, whatever else libavif was built with: 4:0:0 and lossless alpha are known to work with it. */
    encoder->codecChoice = AVIF_CODEC_CHOICE_AOM;
    encoder->maxThreads = 1;
    encoder->speed = speed;
    encoder->minQuantizer = encoder->maxQuantizer = quantizer(quality);
    /* Alpha lossless, as avifenc's default: a mask's edges stay where they were. */
    encoder->minQuantizerAlpha = encoder->maxQuantizerAlpha = AVIF_QUANTIZER_LOSSLESS;
    avifRWData output = AVIF_DATA_EMPTY;
    result = avifEncoderWrite(encoder, image, &output);
    avifEncoderDestroy(encoder);
    avifImageDestroy(image);
    if (result != AVIF_RESULT_OK) {
        avifRWDataFree(&output);
        return failed(result, detail);
    }
    void *copy = malloc(output.size ? output.size : 1);
    if (!copy) {
        avifRWDataFree(&output);
        return CWEB_ERR_MEMORY;
    }
    memcpy(copy, output.data, output.size);
    *out = copy;
    *length = output.size;
    avifRWDataFree(&output);
    return CWEB_OK;
}
