/*
 * coefficients.h: where libjpeg keeps a JPEG's DCT coefficients while it decodes, and who else sees them.
 *
 * libjpeg-turbo is built without a backing store (jmemnobs.c): its memory manager keeps every
 * whole-image coefficient array (a progressive or multi-scan JPEG's, or any JPEG's in buffered-image
 * mode) whole in memory, 128 bytes per 8x8 block, about 1 GB for an 18000x18000 4:2:0 image. This
 * orchestrator replaces three of the manager's methods (request_virt_barray, realize_virt_arrays,
 * access_virt_barray), wraps free_pool, and hands the arrays to one strategy behind a table of
 * methods (coefficient_store_methods), as libjpeg's own jpeg_memory_mgr is a table:
 *  - none: libjpeg's own arrays in memory;
 *  - coefficient_file.c: the arrays in a temporary file, a window of block rows in memory;
 *  - coefficient_stream.c: a single-scan image whose output follows its input: the rows live in
 *    a sink's ring (the transcoder's), never whole.
 * A sink (coefficient_sink.h) can also be told each iMCU row's final coefficients, in order, as
 * the output pass reads them: the TIFF transcoder copies level 0's tiles from them.
 * Calls run one way: decoder.c -> coefficients.c -> the strategies and the sink. The store is
 * found from cinfo->client_data, which the decoder points at it.
 */
#ifndef CJS_COEFFICIENTS_H
#define CJS_COEFFICIENTS_H

#include <stdio.h>
#include <sys/types.h>
#include <jpeglib.h>

#include "coefficient_sink.h"

typedef struct coefficient_store coefficient_store; /* each strategy defines its own */

/* One strategy: the three virtual-array methods of libjpeg's memory manager, for JPOOL_IMAGE. */
typedef struct {
    jvirt_barray_ptr (*request)(coefficient_store *s, j_common_ptr cinfo, boolean pre_zero,
                                JDIMENSION blocks_per_row, JDIMENSION row_count, JDIMENSION max_access);
    void (*realize)(coefficient_store *s, j_common_ptr cinfo);
    JBLOCKARRAY (*access)(coefficient_store *s, j_common_ptr cinfo, jvirt_barray_ptr array, JDIMENSION start,
                          JDIMENSION count, boolean writable);
    /* Bytes the strategy keeps on disk now. */
    unsigned long long (*file_bytes)(const coefficient_store *s);
    /* Frees the arrays, the file and the threads; the store is gone afterwards. */
    void (*destroy)(coefficient_store *s);
} coefficient_store_methods;

extern const coefficient_store_methods coefficient_file_methods;
extern const coefficient_store_methods coefficient_stream_methods;

/* The file strategy over `fd` (owned from here, closed in every case), a window of about
   `window_bytes` of rows per array in memory (0: 1 MiB). NULL when out of memory (fd closed). */
coefficient_store *coefficient_file_create(int fd, size_t window_bytes);
/* The stream strategy over a sink's ring. NULL when out of memory. */
coefficient_store *coefficient_stream_create(const coefficient_sink *sink);

typedef struct {
    /* The strategy for the arrays requested from now on; NULL: libjpeg's own. */
    const coefficient_store_methods *methods;
    coefficient_store *store;
    /* The sink told every iMCU row's final coefficients, or NULL. */
    const coefficient_sink *sink;
    /* Arrays in the order libjpeg requested them: one per component, component order. */
    jvirt_barray_ptr arrays[MAX_COMPONENTS];
    int array_count;
    /* iMCU rows committed to the sink so far. */
    JDIMENSION rows_committed;
    /* libjpeg's own methods, used for everything else (and for everything without a strategy). */
    jvirt_barray_ptr (*request_barray)(j_common_ptr, int, boolean, JDIMENSION, JDIMENSION, JDIMENSION);
    void (*realize)(j_common_ptr);
    JBLOCKARRAY (*access_barray)(j_common_ptr, jvirt_barray_ptr, JDIMENSION, JDIMENSION, boolean);
    void (*free_pool)(j_common_ptr, int);
} cjs_coefficients;

/**
 * Installs the methods on cinfo's memory manager (after jpeg_create_decompress) and points
 * cinfo->client_data at `c`, which must outlive cinfo.
 */
void cjs_coefficients_install(j_decompress_ptr cinfo, cjs_coefficients *c);
/** Sends the arrays requested from now on (before start) to `methods`/`store` (owned from here). */
void cjs_coefficients_use(cjs_coefficients *c, const coefficient_store_methods *methods, coefficient_store *store);
/** Tells `sink` each iMCU row's final coefficients as the output pass reads them (before start). */
void cjs_coefficients_tap(cjs_coefficients *c, const coefficient_sink *sink);
/** The output pass has read every row: the last rows go to the sink. 0 or the sink's errno. */
int cjs_coefficients_output_done(cjs_coefficients *c);
/** Frees the strategy's arrays, file and threads. Safe to call more than once. */
void cjs_coefficients_release(cjs_coefficients *c);
/** Bytes the strategy keeps on disk now (0 without a file). */
unsigned long long cjs_coefficients_file_bytes(const cjs_coefficients *c);
/**
 * Bytes the whole-image coefficient arrays of this image take (as jdcoefct.c sizes them), or 0 when
 * the image has a single scan and needs none. Call after jpeg_read_header.
 */
unsigned long long cjs_coefficients_needed(j_decompress_ptr cinfo);

#endif
