/*
 * webp_encode.c: RGBA pixels to WebP through libwebp's advanced API (a picture, a config, a memory
 * writer), on the caller's thread.
 */
#include "cweb_encoders.h"

#include <stdlib.h>
#include <string.h>
#include <webp/encode.h>
#include <webp/mux.h>

/* The picture's custom pointer: the memory writer first (WebPMemoryWrite takes the pointer as one),
   then the caller's cancellation check. */
struct progress {
    WebPMemoryWriter writer;
    cweb_cancelled cancelled;
    void *context;
};

/* libwebp's progress hook: 0 stops the encode (VP8_ENC_ERROR_USER_ABORT). */
static int keep_going(int percent, const WebPPicture *picture) {
    (void)percent;
    const struct progress *progress = picture->custom_ptr;
    return progress->cancelled(progress->context) ? 0 : 1;
}

cweb_status cweb_webp_encode(const uint8_t *rgba, size_t stride, uint32_t width, uint32_t height, int32_t quality,
                             int32_t lossless, int32_t method, int32_t sharp_yuv, int32_t keep_alpha, const void *icc,
                             size_t icc_length, cweb_cancelled cancelled, void *context, void **out, size_t *length, int32_t *detail) {
    if (detail) *detail = 0;
    if (!rgba || !out || !length || width == 0 || height == 0 || width > CWEB_WEBP_MAX_SIDE ||
        height > CWEB_WEBP_MAX_SIDE || stride < (size_t)width * 4 || stride > INT32_MAX || quality < 1 || quality > 100 ||
        method < 0 || method > 6)
        return CWEB_ERR_ARGUMENT;
    *out = NULL;
    *length = 0;

    WebPConfig config;
    if (!WebPConfigInit(&config)) return CWEB_ERR_ENCODER;
    config.quality = (float)quality;
    config.method = method;
    config.lossless = lossless ? 1 : 0;
    /* Lossless keeps the colour under transparent pixels too: what is decoded is what was given. */
    config.exact = lossless ? 1 : 0;
    config.use_sharp_yuv = !lossless && sharp_yuv ? 1 : 0;
    if (!WebPValidateConfig(&config)) return CWEB_ERR_ARGUMENT;

    WebPPicture picture;
    if (!WebPPictureInit(&picture)) return CWEB_ERR_ENCODER;
    picture.width = (int)width;
    picture.height = (int)height;
    /* ARGB kept until the encode where the encode turns it into YUV itself (lossless, or the sharp
       conversion); otherwise the import converts at once (averaging 2x2 chroma). */
    picture.use_argb = lossless || config.use_sharp_yuv ? 1 : 0;
    int imported = keep_alpha ? WebPPictureImportRGBA(&picture, rgba, (int)stride)
                              : WebPPictureImportRGBX(&picture, rgba, (int)stride);
    if (!imported) {
        WebPPictureFree(&picture);
        return CWEB_ERR_MEMORY;
    }

    struct progress progress = {.cancelled = cancelled, .context = context};
    WebPMemoryWriter *const writer = &progress.writer;
    WebPMemoryWriterInit(writer);
    picture.writer = WebPMemoryWrite;
    picture.custom_ptr = &progress;
    if (cancelled) picture.progress_hook = keep_going;
    int encoded = WebPEncode(&config, &picture);
    WebPEncodingError error = picture.error_code;
    WebPPictureFree(&picture);
    if (!encoded) {
        WebPMemoryWriterClear(writer);
        if (detail) *detail = (int32_t)error;
        if (error == VP8_ENC_ERROR_USER_ABORT) return CWEB_ERR_CANCELLED;
        return error == VP8_ENC_ERROR_OUT_OF_MEMORY || error == VP8_ENC_ERROR_BITSTREAM_OUT_OF_MEMORY ? CWEB_ERR_MEMORY
                                                                                                      : CWEB_ERR_ENCODER;
    }
    WebPData bitstream = {writer->mem, writer->size};
    WebPData assembled = {NULL, 0};
    if (icc && icc_length > 0) {
        /* The image and its profile in one extended file (VP8X, ICCP, the bitstream). */
        WebPMux *mux = WebPMuxNew();
        if (!mux) {
            WebPMemoryWriterClear(writer);
            return CWEB_ERR_MEMORY;
        }
        WebPData profile = {icc, icc_length};
        WebPMuxError error = WebPMuxSetImage(mux, &bitstream, 0);
        if (error == WEBP_MUX_OK) error = WebPMuxSetChunk(mux, "ICCP", &profile, 0);
        if (error == WEBP_MUX_OK) error = WebPMuxAssemble(mux, &assembled);
        WebPMuxDelete(mux);
        if (error != WEBP_MUX_OK) {
            WebPDataClear(&assembled);
            WebPMemoryWriterClear(writer);
            if (detail) *detail = (int32_t)error;
            return error == WEBP_MUX_MEMORY_ERROR ? CWEB_ERR_MEMORY : CWEB_ERR_ENCODER;
        }
        bitstream = assembled;
    }
    /* The library's buffers are freed by the library; the caller's is malloc's (cweb_free). */
    void *copy = malloc(bitstream.size ? bitstream.size : 1);
    if (copy) memcpy(copy, bitstream.bytes, bitstream.size);
    *out = copy;
    *length = copy ? bitstream.size : 0;
    WebPDataClear(&assembled);
    WebPMemoryWriterClear(writer);
    return copy ? CWEB_OK : CWEB_ERR_MEMORY;
}

void cweb_free(void *buffer) { free(buffer); }
