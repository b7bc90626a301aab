/*
 * coefficients.h: libjpeg's whole-image coefficient arrays (the virtual block arrays a progressive or
 * multi-scan JPEG needs) kept in a temporary file, with only a window of block rows in memory.
 *
 * libjpeg-turbo is built without a backing store (jmemnobs.c): its memory manager keeps every
 * virtual array whole in memory, 128 bytes per 8x8 block, about 1 GB for an 18000x18000 4:2:0 image.
 * This replaces three of the manager's methods (request_virt_barray, realize_virt_arrays,
 * access_virt_barray) and wraps free_pool; everything else stays libjpeg's.
 */
#ifndef CJS_COEFFICIENTS_H
#define CJS_COEFFICIENTS_H

#include <pthread.h>
#include <stdio.h>
#include <sys/types.h>
#include <jpeglib.h>

typedef struct cjs_block_array cjs_block_array;
typedef struct cjs_write_job cjs_write_job;

typedef struct {
    /** The temporary file, owned: closed when the image's pool is freed or on release. -1: none. */
    int fd;
    /** Whether block arrays requested from now on go to the file. */
    int active;
    cjs_block_array *arrays;
    /** Bytes the arrays take in the file. */
    unsigned long long file_bytes;
    /** Bytes of block rows held in memory (every window). */
    size_t window_bytes;
    /** Memory asked for each array's window (0: the default, 1 MiB). */
    size_t window_limit;
    /*
     * Write-behind: rows leaving a window are written by a thread of their own while the decoder goes
     * on (copying into the page cache costs about as much as entropy decoding a progressive scan).
     * `lock` guards the queue, `error`, and every array's pool of free row buffers.
     */
    pthread_t writer;
    int writer_started;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    cjs_write_job *head, *tail; /* FIFO; the head is being written */
    int stopping;
    int error;                  /* the first errno a write behind failed with */
    /* A row's encoding, one for the decoder's thread and one for the writer's (scratch_bytes each). */
    unsigned char *scratch, *writer_scratch;
    size_t scratch_bytes;
    /* libjpeg's own methods, used for everything else (and for everything when not active). */
    jvirt_barray_ptr (*request_barray)(j_common_ptr, int, boolean, JDIMENSION, JDIMENSION, JDIMENSION);
    void (*realize)(j_common_ptr);
    JBLOCKARRAY (*access_barray)(j_common_ptr, jvirt_barray_ptr, JDIMENSION, JDIMENSION, boolean);
    void (*free_pool)(j_common_ptr, int);
} cjs_coefficients;

/**
 * Installs the methods on cinfo's memory manager (after jpeg_create_decompress). `c` must outlive
 * cinfo; cjs_coefficients_of(cinfo) must return it.
 */
void cjs_coefficients_install(j_decompress_ptr cinfo, cjs_coefficients *c);
/** The store of a decompressor; defined by the decoder that owns cinfo. */
cjs_coefficients *cjs_coefficients_of(j_common_ptr cinfo);
/**
 * Takes ownership of `fd` and sends the arrays requested from now on to it (before start), each with
 * a window of about `window_bytes` of rows in memory (0: 1 MiB; never under two accesses' rows).
 */
void cjs_coefficients_adopt(cjs_coefficients *c, int fd, size_t window_bytes);
/** Stops the write-behind thread, frees the windows and closes the file. Safe to call more than once. */
void cjs_coefficients_release(cjs_coefficients *c);
/** Releases, then frees what install set up. Last. */
void cjs_coefficients_destroy(cjs_coefficients *c);
/**
 * Bytes the whole-image coefficient arrays of this image take (as jdcoefct.c sizes them), or 0 when
 * the image has a single scan and needs none. Call after jpeg_read_header.
 */
unsigned long long cjs_coefficients_needed(j_decompress_ptr cinfo);

#endif
