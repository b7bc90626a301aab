/* jpeg_tile_decode.c: one JPEG tile of a TIFF into RGBA (cjs_tiff.h): the level's JPEGTables, then the
   tile's abbreviated stream, as libjpeg reads abbreviated datastreams. A decompressor per call. And a
   tile cropped to its top-left region without decoding it: the coefficients read, the frame made
   smaller, the same coefficients written (what jpegtran -crop WxH+0+0 does). */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "tile_codec.h"

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

/* Whether every component's DC table has a code for each difference category an 8-bit image can
   give (0 to 11). A crop keeps every block's AC coefficients, so the AC tables code it as they coded
   the tile; the DC differences change where the smaller frame's rows begin, and may need a category
   the tile never used (libjpeg-turbo's encoder does not check: a missing code would be written as
   nothing, a corrupt stream). */
static int dc_tables_complete(const struct jpeg_decompress_struct *src) {
    if (src->data_precision != 8) return 0;
    for (int ci = 0; ci < src->num_components; ci++) {
        int number = src->comp_info[ci].dc_tbl_no;
        const JHUFF_TBL *table = number >= 0 && number < NUM_HUFF_TBLS ? src->dc_huff_tbl_ptrs[number] : NULL;
        if (!table) return 0;
        int count = 0, seen = 0;
        for (int length = 1; length <= 16; length++) count += table->bits[length];
        for (int i = 0; i < count && i < 256; i++)
            if (table->huffval[i] <= 11) seen |= 1 << table->huffval[i];
        if (seen != (1 << 12) - 1) return 0;
    }
    return 1;
}

/* Gives the compressor the Huffman tables the tile was coded with (the level's JPEGTables, or the
   tile's own), each component the same table numbers. */
static void reuse_huffman_tables(const struct jpeg_decompress_struct *src, struct jpeg_compress_struct *dst) {
    for (int i = 0; i < NUM_HUFF_TBLS; i++) {
        const JHUFF_TBL *from[2] = {src->dc_huff_tbl_ptrs[i], src->ac_huff_tbl_ptrs[i]};
        JHUFF_TBL **to[2] = {&dst->dc_huff_tbl_ptrs[i], &dst->ac_huff_tbl_ptrs[i]};
        for (int k = 0; k < 2; k++) {
            if (!from[k]) continue;
            if (!*to[k]) *to[k] = jpeg_alloc_huff_table((j_common_ptr)dst);
            memcpy((*to[k])->bits, from[k]->bits, sizeof(from[k]->bits));
            memcpy((*to[k])->huffval, from[k]->huffval, sizeof(from[k]->huffval));
            (*to[k])->sent_table = FALSE;
        }
    }
    for (int ci = 0; ci < src->num_components && ci < dst->num_components; ci++) {
        dst->comp_info[ci].dc_tbl_no = src->comp_info[ci].dc_tbl_no;
        dst->comp_info[ci].ac_tbl_no = src->comp_info[ci].ac_tbl_no;
    }
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
        keep_message(err.message, message, capacity);
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
        keep_message(refusal ? refusal : "the tile is neither YCbCr nor gray", message, capacity);
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
    /* The tile's own tables where they can code the crop (one pass), else tables made for it (two). */
    if (dc_tables_complete(&src)) reuse_huffman_tables(&src, &dst);
    else dst.optimize_coding = TRUE;
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
