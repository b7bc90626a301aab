/* jpeg_tile_decode.c: one JPEG tile of a TIFF into RGBA (cjs_tiff.h): the level's JPEGTables, then the
   tile's abbreviated stream, as libjpeg reads abbreviated datastreams. A decompressor per call. */
#include <stdlib.h>
#include <string.h>

#include "errors.h"

static void keep_message(const char *text, char *message, size_t capacity) {
    if (message && capacity) snprintf(message, capacity, "%s", text);
}

/* The colour space the samples are in, from the photometric interpretation, as libtiff decides it. */
static int color_space(int32_t photometric, int components, J_COLOR_SPACE *space) {
    if (photometric == CJS_PHOTOMETRIC_GRAY && components == 1) *space = JCS_GRAYSCALE;
    else if (photometric == CJS_PHOTOMETRIC_YCBCR && components == 3) *space = JCS_YCbCr;
    else if (photometric == CJS_PHOTOMETRIC_RGB && components == 3) *space = JCS_RGB;
    else return 0;
    return 1;
}

cjs_status cjs_jpeg_tile_decode(const void *tables, size_t tables_length, const void *tile, size_t tile_length,
                                int32_t photometric, uint32_t width, uint32_t height, void *rgba, size_t stride,
                                char *message, size_t capacity) {
    if (!tile || tile_length == 0 || !rgba || width == 0 || height == 0 || stride < (size_t)width * 4)
        return CJS_ERR_ARGUMENT;
    struct jpeg_decompress_struct c;
    cjs_error_mgr err;
    cjs_error_init(&err, 100);
    err.refuses_truncation = 1; /* a tile cut short is an error, not grey rows */
    c.err = &err.pub;
    volatile int created = 0;
    const char *refusal = NULL;
    if (setjmp(err.jump)) { /* jpeg_read_header, jpeg_start_decompress, jpeg_read_scanlines */
        keep_message(err.message, message, capacity);
        if (created) jpeg_destroy_decompress(&c);
        return err.pub.msg_code == JERR_OUT_OF_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
    }
    jpeg_create_decompress(&c);
    created = 1;
    if (tables && tables_length) {
        jpeg_mem_src(&c, tables, (unsigned long)tables_length);
        if (jpeg_read_header(&c, FALSE) != JPEG_HEADER_TABLES_ONLY) refusal = "the JPEGTables hold an image";
    }
    J_COLOR_SPACE space = JCS_UNKNOWN;
    if (!refusal) {
        jpeg_mem_src(&c, tile, (unsigned long)tile_length);
        if (jpeg_read_header(&c, TRUE) != JPEG_HEADER_OK) refusal = "the tile holds no image";
        else if (c.image_width != width || c.image_height != height) refusal = "the tile's JPEG is not the tile's size";
        else if (!color_space(photometric, c.num_components, &space))
            refusal = "the tile's components do not match the photometric interpretation";
    }
    if (refusal) {
        keep_message(refusal, message, capacity);
        jpeg_destroy_decompress(&c);
        return CJS_ERR_LIBJPEG;
    }
    c.jpeg_color_space = space;
    c.out_color_space = JCS_EXT_RGBX; /* the fourth byte is 255 */
    jpeg_start_decompress(&c);
    while (c.output_scanline < c.output_height) {
        JSAMPROW row = (JSAMPROW)rgba + (size_t)c.output_scanline * stride;
        jpeg_read_scanlines(&c, &row, 1);
    }
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    return CJS_OK;
}
