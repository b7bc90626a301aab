/* reference.c: whole-image decodes with libjpeg's ordinary, non-suspending API (tests, benchmarks). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "cjpeg_reference.h"

/* A plain error manager: errors longjmp, warnings are counted, nothing prints. */
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
    unsigned warnings;
} reference_error;

static void error_exit(j_common_ptr cinfo) {
    reference_error *err = (reference_error *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

static void emit_message(j_common_ptr cinfo, int level) {
    reference_error *err = (reference_error *)cinfo->err;
    if (level >= 0) return;
    err->warnings++;
    (*cinfo->err->format_message)(cinfo, err->message);
}

static void output_message(j_common_ptr cinfo) { (void)cinfo; }

static void init_error(reference_error *err) {
    jpeg_std_error(&err->pub);
    err->pub.error_exit = error_exit;
    err->pub.emit_message = emit_message;
    err->pub.output_message = output_message;
    err->message[0] = 0;
    err->warnings = 0;
}

static void fill_result(const struct jpeg_decompress_struct *c, const reference_error *err, cjs_reference_result *r) {
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

/* Adobe (inverted) CMYK to RGB: each of C, M, Y times K / 255, rounded; alpha 255. */
static void cmyk_to_rgba(unsigned char *row, unsigned width) {
    for (unsigned x = 0; x < width; x++, row += 4) {
        unsigned k = row[3];
        for (int c = 0; c < 3; c++) row[c] = (unsigned char)((row[c] * k + 127) / 255);
        row[3] = 255;
    }
}

int32_t cjs_reference_decode(const void *data, size_t length, void **out, cjs_reference_result *r) {
    return cjs_reference_decode_scaled(data, length, 1, out, r);
}

int32_t cjs_reference_decode_scaled(const void *data, size_t length, uint32_t denominator, void **out,
                                    cjs_reference_result *r) {
    struct jpeg_decompress_struct cinfo;
    reference_error err;
    unsigned char *volatile pixels = NULL;
    *out = NULL;
    memset(r, 0, sizeof *r);
    init_error(&err);
    cinfo.err = &err.pub;
    if (setjmp(err.jump)) { /* any libjpeg call below */
        fill_result(&cinfo, &err, r);
        r->failed = 1;
        jpeg_destroy_decompress(&cinfo);
        free(pixels);
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)length);
    jpeg_read_header(&cinfo, TRUE);
    int cmyk;
    choose_output(&cinfo, &cmyk);
    cinfo.scale_num = 1;
    cinfo.scale_denom = denominator;
    jpeg_start_decompress(&cinfo);
    size_t stride = (size_t)cinfo.output_width * 4;
    pixels = malloc(stride * cinfo.output_height);
    if (!pixels) ERREXIT(&cinfo, JERR_OUT_OF_MEMORY);
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = pixels + (size_t)cinfo.output_scanline * stride;
        jpeg_read_scanlines(&cinfo, &row, 1);
        if (cmyk) cmyk_to_rgba(row, cinfo.output_width);
    }
    jpeg_finish_decompress(&cinfo);
    fill_result(&cinfo, &err, r);
    jpeg_destroy_decompress(&cinfo);
    *out = pixels;
    return 0;
}

int32_t cjs_reference_decode_file_discard(const char *path, cjs_reference_result *r) {
    struct jpeg_decompress_struct cinfo;
    reference_error err;
    unsigned char *volatile strip = NULL;
    FILE *volatile file = fopen(path, "rb");
    memset(r, 0, sizeof *r);
    if (!file) {
        r->failed = 1;
        snprintf(r->message, sizeof r->message, "cannot open %s", path);
        return -1;
    }
    init_error(&err);
    cinfo.err = &err.pub;
    if (setjmp(err.jump)) { /* any libjpeg call below */
        fill_result(&cinfo, &err, r);
        r->failed = 1;
        jpeg_destroy_decompress(&cinfo);
        free(strip);
        fclose(file);
        return -1;
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
    return 0;
}

void cjs_reference_free(void *pointer) { free(pointer); }
