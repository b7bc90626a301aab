/* coefficients.c: the orchestrator of the coefficient arrays (coefficients.h): libjpeg's memory manager
   methods, one strategy behind a table, and the tap that hands each final iMCU row to a sink. */
#include <errno.h>
#include <string.h>

#include "coefficients.h"
#include "errors.h"

static cjs_coefficients *store_of(j_common_ptr cinfo) { return (cjs_coefficients *)cinfo->client_data; }

static jvirt_barray_ptr request_barray(j_common_ptr cinfo, int pool_id, boolean pre_zero, JDIMENSION blocks_per_row,
                                       JDIMENSION row_count, JDIMENSION max_access) {
    cjs_coefficients *c = store_of(cinfo);
    jvirt_barray_ptr array;
    if (!c->methods) {
        array = c->request_barray(cinfo, pool_id, pre_zero, blocks_per_row, row_count, max_access);
    } else {
        if (pool_id != JPOOL_IMAGE) ERREXIT1(cinfo, JERR_BAD_POOL_ID, pool_id);
        array = c->methods->request(c->store, cinfo, pre_zero, blocks_per_row, row_count, max_access);
    }
    if (c->array_count < MAX_COMPONENTS) c->arrays[c->array_count++] = array;
    return array;
}

static void realize(j_common_ptr cinfo) {
    cjs_coefficients *c = store_of(cinfo);
    c->realize(cinfo); /* libjpeg's own arrays, if any */
    if (c->methods) c->methods->realize(c->store, cinfo);
}

/* Commits iMCU rows below `end` to the sink; a failed sink fails the decode. */
static void commit(j_common_ptr cinfo, cjs_coefficients *c, JDIMENSION end) {
    if (end <= c->rows_committed) return;
    int error = c->sink->commit(c->sink->context, end);
    if (error) cjs_error_io(cinfo, "cannot write level 0's tiles", error);
    c->rows_committed = end;
}

/*
 * The output pass reads each component's block rows of one iMCU row at a time, in order (libjpeg's
 * decompress_data: block smoothing is off). Once it reads a row, every row above is final and has
 * been read whole: those are committed. Rows from a strategy of libjpeg's or the file's are copied
 * into the sink's ring as they are read; the stream strategy's rows are the ring already.
 */
static void tap(j_common_ptr cinfo, cjs_coefficients *c, jvirt_barray_ptr array, JDIMENSION start, JDIMENSION count,
                JBLOCKARRAY rows) {
    int component = -1;
    for (int i = 0; i < c->array_count; i++)
        if (c->arrays[i] == array) component = i;
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (component < 0 || component >= d->num_components) ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    const jpeg_component_info *info = &d->comp_info[component];
    JDIMENSION v = (JDIMENSION)info->v_samp_factor;
    if (start % v != 0 || count != v) ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    JDIMENSION row = start / v;
    if (row < c->rows_committed) ERREXIT(cinfo, JERR_BAD_VIRTUAL_ACCESS);
    commit(cinfo, c, row);
    if (c->methods == &coefficient_stream_methods) return;
    int error = 0;
    JBLOCKARRAY ring = c->sink->rows(c->sink->context, component, row, &error);
    if (!ring) cjs_error_io(cinfo, "cannot write level 0's tiles", error ? error : EIO);
    JDIMENSION blocks = (info->width_in_blocks + (JDIMENSION)info->h_samp_factor - 1) /
                        (JDIMENSION)info->h_samp_factor * (JDIMENSION)info->h_samp_factor;
    for (JDIMENSION i = 0; i < count; i++) memcpy(ring[i], rows[i], (size_t)blocks * sizeof(JBLOCK));
}

static JBLOCKARRAY access_barray(j_common_ptr cinfo, jvirt_barray_ptr ptr, JDIMENSION start, JDIMENSION count,
                                 boolean writable) {
    cjs_coefficients *c = store_of(cinfo);
    JBLOCKARRAY rows = c->methods ? c->methods->access(c->store, cinfo, ptr, start, count, writable)
                                  : c->access_barray(cinfo, ptr, start, count, writable);
    if (c->sink && !writable) tap(cinfo, c, ptr, start, count, rows);
    return rows;
}

static void free_pool(j_common_ptr cinfo, int pool_id) {
    cjs_coefficients *c = store_of(cinfo);
    if (pool_id == JPOOL_IMAGE) cjs_coefficients_release(c);
    c->free_pool(cinfo, pool_id);
}

void cjs_coefficients_install(j_decompress_ptr cinfo, cjs_coefficients *c) {
    struct jpeg_memory_mgr *mem = cinfo->mem;
    memset(c, 0, sizeof *c);
    c->request_barray = mem->request_virt_barray;
    c->realize = mem->realize_virt_arrays;
    c->access_barray = mem->access_virt_barray;
    c->free_pool = mem->free_pool;
    mem->request_virt_barray = request_barray;
    mem->realize_virt_arrays = realize;
    mem->access_virt_barray = access_barray;
    mem->free_pool = free_pool;
    cinfo->client_data = c;
}

void cjs_coefficients_use(cjs_coefficients *c, const coefficient_store_methods *methods, coefficient_store *store) {
    if (c->methods) c->methods->destroy(c->store);
    c->methods = methods;
    c->store = store;
}

void cjs_coefficients_tap(cjs_coefficients *c, const coefficient_sink *sink) {
    c->sink = sink;
    c->rows_committed = 0;
}

int cjs_coefficients_output_done(cjs_coefficients *c) {
    if (!c->sink) return 0;
    int error = c->sink->commit(c->sink->context, (JDIMENSION)-1);
    c->rows_committed = (JDIMENSION)-1;
    return error;
}

void cjs_coefficients_release(cjs_coefficients *c) {
    if (c->methods) c->methods->destroy(c->store);
    c->methods = NULL;
    c->store = NULL;
    c->array_count = 0;
}

unsigned long long cjs_coefficients_file_bytes(const cjs_coefficients *c) {
    return c->methods ? c->methods->file_bytes(c->store) : 0;
}

unsigned long long cjs_coefficients_needed(j_decompress_ptr cinfo) {
    if (!jpeg_has_multiple_scans(cinfo)) return 0;
    unsigned long long total = 0;
    for (int ci = 0; ci < cinfo->num_components; ci++) {
        const jpeg_component_info *comp = &cinfo->comp_info[ci];
        unsigned long long across = (comp->width_in_blocks + comp->h_samp_factor - 1) / comp->h_samp_factor;
        unsigned long long down = (comp->height_in_blocks + comp->v_samp_factor - 1) / comp->v_samp_factor;
        total += across * comp->h_samp_factor * down * comp->v_samp_factor * sizeof(JBLOCK);
    }
    return total;
}
