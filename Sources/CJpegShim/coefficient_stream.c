/*
 * coefficient_stream.c: the stream strategy, for a single-scan image decoded in buffered-image mode
 * so that its coefficients can be transcoded: libjpeg's output pass reads each iMCU row right after
 * its input pass decoded it, so no array is ever whole. Each access is answered with the sink's ring
 * rows of that iMCU row (coefficient_sink.h), which the sink zeroes when it hands them out (libjpeg
 * asks for pre-zeroed arrays). Nothing is allocated here but the arrays' descriptions.
 */
#include <errno.h>
#include <stdlib.h>

#include "coefficients.h"
#include "errors.h"

typedef struct stream_array {
    struct stream_array *next;
    int component;
    JDIMENSION blocks_per_row, row_count, rows_per_access;
} stream_array;

struct coefficient_store {
    const coefficient_sink *sink;
    stream_array *arrays;
    int count;
};

static jvirt_barray_ptr request(coefficient_store *s, j_common_ptr cinfo, boolean pre_zero, JDIMENSION blocks_per_row,
                                JDIMENSION row_count, JDIMENSION max_access) {
    (void)pre_zero; /* the sink's rows are always zero when handed out */
    stream_array *a = calloc(1, sizeof *a);
    if (!a) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 20);
    a->next = s->arrays;
    s->arrays = a;
    a->component = s->count++;
    a->blocks_per_row = blocks_per_row;
    a->row_count = row_count;
    a->rows_per_access = max_access;
    return (jvirt_barray_ptr)(void *)a;
}

static void realize(coefficient_store *s, j_common_ptr cinfo) {
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    /* One array per component, each accessed one iMCU row (its v_samp_factor block rows) at a time. */
    for (stream_array *a = s->arrays; a; a = a->next)
        if (a->component >= d->num_components ||
            a->rows_per_access != (JDIMENSION)d->comp_info[a->component].v_samp_factor)
            ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
}

static JBLOCKARRAY access_array(coefficient_store *s, j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start,
                          JDIMENSION count, boolean writable) {
    (void)writable;
    stream_array *a = (stream_array *)(void *)ptr;
    if (count != a->rows_per_access || start % a->rows_per_access != 0 || start + count > a->row_count)
        ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    int error = 0;
    JBLOCKARRAY rows = s->sink->rows(s->sink->context, a->component, start / a->rows_per_access, &error);
    if (!rows) cjs_error_io(cinfo, "cannot write level 0's tiles", error ? error : EIO);
    return rows;
}

static unsigned long long file_bytes(const coefficient_store *s) {
    (void)s;
    return 0;
}

static void destroy(coefficient_store *s) {
    while (s->arrays) {
        stream_array *a = s->arrays;
        s->arrays = a->next;
        free(a);
    }
    free(s);
}

const coefficient_store_methods coefficient_stream_methods = {
    .request = request, .realize = realize, .access = access_array, .file_bytes = file_bytes, .destroy = destroy,
};

coefficient_store *coefficient_stream_create(const coefficient_sink *sink) {
    coefficient_store *s = calloc(1, sizeof *s);
    if (s) s->sink = sink;
    return s;
}
