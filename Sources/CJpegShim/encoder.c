/* encoder.c: an in-memory JPEG encoder (jpeg_mem_dest) for tests, the demo and resized copies. */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "rows.h"

struct cjs_encoder {
    struct jpeg_compress_struct cinfo;
    cjs_error_mgr err;
    unsigned char *output;
    unsigned long output_length;
    int failed;
    int started;
    int components;
    uint8_t *flat; /* a row with alpha composited onto white (colour images) */
};

cjs_status cjs_encoder_create(const cjs_encoder_options *o, cjs_encoder **out) {
    if (!o || !out || o->width == 0 || o->height == 0 || (o->components != 1 && o->components != 3))
        return CJS_ERR_ARGUMENT;
    *out = NULL;
    cjs_encoder *e = calloc(1, sizeof *e);
    if (!e) return CJS_ERR_NOMEM;
    cjs_error_init(&e->err, 0);
    e->cinfo.err = &e->err.pub;
    e->components = o->components;
    if (o->components == 3 && !(e->flat = malloc((size_t)o->width * 4))) {
        free(e);
        return CJS_ERR_NOMEM;
    }
    if (setjmp(e->err.jump)) { /* jpeg_create_compress ... jpeg_start_compress */
        int created = e->cinfo.global_state != 0;
        if (created) jpeg_destroy_compress(&e->cinfo);
        free(e->output);
        free(e->flat);
        free(e);
        return CJS_ERR_LIBJPEG;
    }
    jpeg_create_compress(&e->cinfo);
    jpeg_mem_dest(&e->cinfo, &e->output, &e->output_length);
    e->cinfo.image_width = o->width;
    e->cinfo.image_height = o->height;
    e->cinfo.input_components = o->components == 1 ? 1 : 4;
    e->cinfo.in_color_space = o->components == 1 ? JCS_GRAYSCALE : JCS_EXT_RGBX;
    jpeg_set_defaults(&e->cinfo);
    jpeg_set_quality(&e->cinfo, o->quality > 0 ? o->quality : 85, TRUE);
    if (o->components == 3) {
        e->cinfo.comp_info[0].h_samp_factor = o->h_sampling > 0 ? o->h_sampling : 2;
        e->cinfo.comp_info[0].v_samp_factor = o->v_sampling > 0 ? o->v_sampling : 2;
    }
    if (o->progressive) jpeg_simple_progression(&e->cinfo);
    e->cinfo.restart_in_rows = o->restart_rows;
    e->cinfo.optimize_coding = o->optimize_coding ? TRUE : FALSE;
    e->cinfo.arith_code = o->arithmetic ? TRUE : FALSE;
    jpeg_start_compress(&e->cinfo, TRUE);
    e->started = 1;
    *out = e;
    return CJS_OK;
}

void cjs_encoder_destroy(cjs_encoder *e) {
    if (!e) return;
    jpeg_destroy_compress(&e->cinfo);
    free(e->output);
    free(e->flat);
    free(e);
}

cjs_status cjs_encoder_write_marker(cjs_encoder *e, int32_t marker, const void *data, size_t length) {
    if (e->failed || e->cinfo.next_scanline != 0) return CJS_ERR_STATE;
    if (length > 65533 || (length && !data)) return CJS_ERR_ARGUMENT;
    if (setjmp(e->err.jump)) { /* jpeg_write_marker */
        e->failed = 1;
        return CJS_ERR_LIBJPEG;
    }
    jpeg_write_marker(&e->cinfo, marker, data, (unsigned)length);
    return CJS_OK;
}

cjs_status cjs_encoder_write_icc(cjs_encoder *e, const void *data, size_t length) {
    if (e->failed || e->cinfo.next_scanline != 0) return CJS_ERR_STATE;
    if (!data || length == 0 || length > 255u * 65519u) return CJS_ERR_ARGUMENT;
    if (setjmp(e->err.jump)) { /* jpeg_write_icc_profile */
        e->failed = 1;
        return CJS_ERR_LIBJPEG;
    }
    jpeg_write_icc_profile(&e->cinfo, data, (unsigned)length);
    return CJS_OK;
}

cjs_status cjs_encoder_write_rows(cjs_encoder *e, const void *rows, size_t stride, uint32_t count) {
    if (e->failed) return CJS_ERR_STATE;
    if (!rows && count) return CJS_ERR_ARGUMENT;
    if (count > e->cinfo.image_height - e->cinfo.next_scanline) return CJS_ERR_ARGUMENT;
    const unsigned char *base = rows;
    if (setjmp(e->err.jump)) { /* jpeg_write_scanlines */
        e->failed = 1;
        return CJS_ERR_LIBJPEG;
    }
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *source = base + (size_t)i * stride;
        /* JPEG keeps no alpha: a colour row with some is composited onto white. */
        JSAMPROW row = (JSAMPROW)(e->flat ? cjs_rgba_over_white(source, e->cinfo.image_width, e->flat) : source);
        jpeg_write_scanlines(&e->cinfo, &row, 1);
    }
    return CJS_OK;
}

cjs_status cjs_encoder_finish(cjs_encoder *e, const void **out, size_t *length) {
    if (e->failed || e->cinfo.next_scanline != e->cinfo.image_height) return CJS_ERR_STATE;
    if (setjmp(e->err.jump)) { /* jpeg_finish_compress */
        e->failed = 1;
        return CJS_ERR_LIBJPEG;
    }
    if (e->started) jpeg_finish_compress(&e->cinfo);
    e->started = 0;
    *out = e->output;
    *length = e->output_length;
    return CJS_OK;
}

const char *cjs_encoder_message(const cjs_encoder *e) { return e->err.message; }
