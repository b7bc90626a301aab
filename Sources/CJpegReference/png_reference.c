/* png_reference.c: libpng's simplified whole-image read, for tests of exported PNG tiles. */
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cjpeg_reference.h"

int32_t cjs_reference_decode_png(const void *data, size_t length, void **out, cjs_reference_result *result) {
    memset(result, 0, sizeof *result);
    *out = NULL;
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, data, length)) {
        snprintf(result->message, sizeof result->message, "%s", image.message);
        result->failed = 1;
        return -1;
    }
    image.format = PNG_FORMAT_RGBA;
    void *pixels = malloc(PNG_IMAGE_SIZE(image));
    if (!pixels || !png_image_finish_read(&image, NULL, pixels, 0, NULL)) {
        snprintf(result->message, sizeof result->message, "%s", pixels ? image.message : "out of memory");
        free(pixels);
        png_image_free(&image);
        result->failed = 1;
        return -1;
    }
    result->width = image.width;
    result->height = image.height;
    *out = pixels;
    return 0;
}
