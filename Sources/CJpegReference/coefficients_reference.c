/* coefficients_reference.c: a JPEG's quantized DCT coefficients read whole with libjpeg's own
   transcoding API (jpeg_read_coefficients), for tests that check a tile's coefficients against its
   source's. Not part of the shipped library. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "cjpeg_reference.h"

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} coefficient_error;

static void error_exit(j_common_ptr cinfo) {
    coefficient_error *err = (coefficient_error *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->jump, 1);
}

static void silent(j_common_ptr cinfo, int level) { (void)cinfo, (void)level; }

/* Copies component `ci`'s real blocks (width_in_blocks x height_in_blocks) out of libjpeg's array. */
static int copy_component(j_decompress_ptr c, jvirt_barray_ptr array, int ci, cjs_reference_component *out) {
    const jpeg_component_info *info = &c->comp_info[ci];
    out->h = (uint32_t)info->h_samp_factor;
    out->v = (uint32_t)info->v_samp_factor;
    out->width_in_blocks = info->width_in_blocks;
    out->height_in_blocks = info->height_in_blocks;
    for (int k = 0; k < DCTSIZE2; k++) out->quant[k] = info->quant_table ? info->quant_table->quantval[k] : 0;
    size_t blocks = (size_t)info->width_in_blocks * info->height_in_blocks;
    out->blocks = malloc(blocks * DCTSIZE2 * sizeof(int16_t));
    if (!out->blocks) return -1;
    for (JDIMENSION row = 0; row < info->height_in_blocks; row++) {
        JBLOCKARRAY rows = (*c->mem->access_virt_barray)((j_common_ptr)c, array, row, 1, FALSE);
        memcpy(out->blocks + (size_t)row * info->width_in_blocks * DCTSIZE2, rows[0],
               (size_t)info->width_in_blocks * sizeof(JBLOCK));
    }
    return 0;
}

int32_t cjs_reference_read_coefficients(const void *tables, size_t tables_length, const void *data, size_t length,
                                        cjs_reference_coefficients *out) {
    memset(out, 0, sizeof *out);
    struct jpeg_decompress_struct c;
    coefficient_error err;
    c.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = error_exit;
    err.pub.emit_message = silent;
    if (setjmp(err.jump)) { /* jpeg_read_header, jpeg_read_coefficients */
        snprintf(out->message, sizeof out->message, "%s", err.message);
        jpeg_destroy_decompress(&c);
        cjs_reference_free_coefficients(out);
        return -1;
    }
    jpeg_create_decompress(&c);
    if (tables && tables_length) {
        jpeg_mem_src(&c, tables, (unsigned long)tables_length);
        jpeg_read_header(&c, FALSE);
    }
    jpeg_mem_src(&c, data, (unsigned long)length);
    jpeg_read_header(&c, TRUE);
    jvirt_barray_ptr *arrays = jpeg_read_coefficients(&c);
    out->components = c.num_components > 4 ? 4 : c.num_components;
    for (int ci = 0; ci < out->components; ci++)
        if (copy_component(&c, arrays[ci], ci, &out->component[ci]) != 0) ERREXIT1(&c, JERR_OUT_OF_MEMORY, 0);
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    return 0;
}

void cjs_reference_free_coefficients(cjs_reference_coefficients *c) {
    for (int ci = 0; ci < 4; ci++) {
        free(c->component[ci].blocks);
        c->component[ci].blocks = NULL;
    }
}
