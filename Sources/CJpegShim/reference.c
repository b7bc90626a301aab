/* reference.c: whole-image decodes with libjpeg's ordinary, non-suspending API. */
#include <stdlib.h>
#include <string.h>

#include "errors.h"

static void fill_result(const struct jpeg_decompress_struct *c, const cjs_error_mgr *err,
                        cjs_reference_result *r) {
    r->width = c->output_width;
    r->height = c->output_height;
    r->warnings = err->warnings;
    strncpy(r->message, err->message, sizeof r->message - 1);
    r->message[sizeof r->message - 1] = 0;
}

static void choose_output(struct jpeg_decompress_struct *c, int *cmyk) {
    *cmyk = c->jpeg_color_space == JCS_CMYK || c->jpeg_color_space == JCS_YCCK;
    c->out_color_space = *cmyk ? JCS_CMYK : JCS_EXT_RGBX;
}

cjs_status cjs_reference_decode(const void *data, size_t length, void **out, cjs_reference_result *r) {
    struct jpeg_decompress_struct cinfo;
    cjs_error_mgr err;
    unsigned char *volatile pixels = NULL;
    *out = NULL;
    memset(r, 0, sizeof *r);
    cjs_error_init(&err, 100000);
    cinfo.err = &err.pub;
    if (setjmp(err.jump)) { /* any libjpeg call below */
        fill_result(&cinfo, &err, r);
        r->failed = 1;
        jpeg_destroy_decompress(&cinfo);
        free(pixels);
        return CJS_ERR_LIBJPEG;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)length);
    jpeg_read_header(&cinfo, TRUE);
    int cmyk;
    choose_output(&cinfo, &cmyk);
    jpeg_start_decompress(&cinfo);
    size_t stride = (size_t)cinfo.output_width * 4;
    pixels = malloc(stride * cinfo.output_height);
    if (!pixels) ERREXIT(&cinfo, JERR_OUT_OF_MEMORY);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = pixels + (size_t)cinfo.output_scanline * stride;
        jpeg_read_scanlines(&cinfo, &row, 1);
        if (cmyk) cjs_cmyk_to_rgba(row, cinfo.output_width);
    }
    jpeg_finish_decompress(&cinfo);
    fill_result(&cinfo, &err, r);
    jpeg_destroy_decompress(&cinfo);
    *out = pixels;
    return CJS_OK;
}

cjs_status cjs_reference_decode_file_discard(const char *path, cjs_reference_result *r) {
    struct jpeg_decompress_struct cinfo;
    cjs_error_mgr err;
    unsigned char *volatile strip = NULL;
    FILE *volatile file = fopen(path, "rb");
    memset(r, 0, sizeof *r);
    if (!file) {
        r->failed = 1;
        return CJS_ERR_IO;
    }
    cjs_error_init(&err, 100000);
    cinfo.err = &err.pub;
    if (setjmp(err.jump)) { /* any libjpeg call below */
        fill_result(&cinfo, &err, r);
        r->failed = 1;
        jpeg_destroy_decompress(&cinfo);
        free(strip);
        fclose(file);
        return CJS_ERR_LIBJPEG;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_stdio_src(&cinfo, file);
    jpeg_read_header(&cinfo, TRUE);
    int cmyk;
    choose_output(&cinfo, &cmyk);
    jpeg_start_decompress(&cinfo);
    size_t stride = (size_t)cinfo.output_width * 4;
    strip = malloc(stride * 16);
    if (!strip) ERREXIT(&cinfo, JERR_OUT_OF_MEMORY);
    JSAMPROW rows[16];
    for (int i = 0; i < 16; i++) rows[i] = strip + (size_t)i * stride;
    while (cinfo.output_scanline < cinfo.output_height) jpeg_read_scanlines(&cinfo, rows, 16);
    jpeg_finish_decompress(&cinfo);
    fill_result(&cinfo, &err, r);
    jpeg_destroy_decompress(&cinfo);
    free(strip);
    fclose(file);
    return CJS_OK;
}

void cjs_free(void *pointer) { free(pointer); }
