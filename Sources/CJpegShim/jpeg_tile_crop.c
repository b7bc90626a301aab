/* jpeg_tile_crop.c: a JPEG tile of a TIFF cropped to its top-left region without decoding it (cjs_tiff.h):
   the coefficients read, the frame made smaller, the same coefficients written (what jpegtran -crop
   WxH+0+0 does). A decompressor and a compressor per call. */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "tile_codec.h"

static void crop_message(const char *text, char *message, size_t capacity) {
    if (message && capacity) snprintf(message, capacity, "%s", text);
}

cjs_status cjs_jpeg_tile_crop(const void *tables, size_t tables_length, const void *tile, size_t tile_length,
                              uint32_t tile_width, uint32_t tile_height, uint32_t width, uint32_t height, void **out,
                              size_t *out_length, char *message, size_t capacity) {
    if (!tile || tile_length == 0 || !out || !out_length || width == 0 || height == 0 || width > tile_width ||
        height > tile_height)
        return CJS_ERR_ARGUMENT;
    *out = NULL;
    *out_length = 0;
    struct jpeg_decompress_struct src;
    struct jpeg_compress_struct dst;
    cjs_error_mgr err;
    cjs_error_init(&err, 100);
    err.refuses_truncation = 1; /* a tile cut short is an error */
    src.err = &err.pub;
    dst.err = &err.pub;
    volatile int created = 0; /* 1: src; 2: src and dst */
    cjs_bytes bytes = {0}; /* changed after setjmp, read by the handler: its address is taken (the destination
                              holds it), so it lives in memory, never in a register the longjmp restores */
    cjs_bytes_destination dest;
    if (setjmp(err.jump)) { /* jpeg_read_header, jpeg_read_coefficients, jpeg_write_coefficients, jpeg_finish_compress */
        crop_message(err.message, message, capacity);
        if (created == 2) jpeg_destroy_compress(&dst);
        if (created >= 1) jpeg_destroy_decompress(&src);
        free(bytes.data);
        return err.pub.msg_code == JERR_OUT_OF_MEMORY ? CJS_ERR_NOMEM : CJS_ERR_LIBJPEG;
    }
    jpeg_create_decompress(&src);
    created = 1;
    const char *refusal = NULL; /* the data is not such a tile */
    if (tables && tables_length) {
        jpeg_mem_src(&src, tables, (unsigned long)tables_length);
        if (jpeg_read_header(&src, FALSE) != JPEG_HEADER_TABLES_ONLY) refusal = "the JPEGTables hold an image";
    }
    if (!refusal) {
        jpeg_mem_src(&src, tile, (unsigned long)tile_length);
        jpeg_read_header(&src, TRUE); /* an error (longjmp) when the stream holds no image */
        /* The tile's own size, as the TIFF says it: a header claiming more never gets its coefficients read. */
        if (src.image_width != tile_width || src.image_height != tile_height) refusal = "the tile's JPEG is not the tile's size";
    }
    int colour = !refusal && (src.jpeg_color_space == JCS_YCbCr || src.jpeg_color_space == JCS_GRAYSCALE);
    if (refusal || !colour) {
        crop_message(refusal ? refusal : "the tile is neither YCbCr nor gray", message, capacity);
        jpeg_destroy_decompress(&src);
        return refusal ? CJS_ERR_LIBJPEG : CJS_ERR_ARGUMENT;
    }
    jvirt_barray_ptr *coefficients = jpeg_read_coefficients(&src);
    jpeg_create_compress(&dst);
    created = 2;
    jpeg_copy_critical_parameters(&src, &dst);
    /* The region starts at the origin, so the source's arrays serve as they are: the smaller frame
       reads only the blocks it covers (and pads its last MCUs as every encoder does). */
    dst.image_width = width;
    dst.image_height = height;
#if JPEG_LIB_VERSION >= 80
    dst.jpeg_width = width; /* libjpeg 8's API writes these into the frame when transcoding */
    dst.jpeg_height = height;
#endif
    dst.optimize_coding = TRUE;
    cjs_bytes_destination_init(&dest, &bytes);
    dst.dest = &dest.pub;
    jpeg_write_coefficients(&dst, coefficients);
    jpeg_finish_compress(&dst);
    jpeg_destroy_compress(&dst);
    jpeg_finish_decompress(&src);
    jpeg_destroy_decompress(&src);
    *out = bytes.data;
    *out_length = bytes.length;
    return CJS_OK;
}
