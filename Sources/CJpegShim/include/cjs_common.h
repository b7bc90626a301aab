/*
 * cjs_common.h: what every header of the C side of TiledImageKit shares (statuses, failure kinds).
 *
 * Conventions: every function returns a cjs_status, results come back through out-parameters,
 * byte buffers cross as void pointers plus a size_t length. Every function that calls libjpeg
 * arms its own setjmp first, so a libjpeg error never longjmps across a caller's frame. After an
 * error a handle is poisoned: every call but destroy returns CJS_ERR_STATE. No globals, no
 * printing. A handle is not thread-safe: one thread at a time (its Swift owner serializes).
 */
#ifndef CJS_COMMON_H
#define CJS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CJS_OK = 0,
    /** The decoder needs more bytes before it can go on (libjpeg suspended). */
    CJS_NEED_DATA = 1,
    /** All scanlines have been read, or the decoder reached the end of the image. */
    CJS_DONE = 2,
    /** libjpeg reported an error; cjs_decoder_message() says which. */
    CJS_ERR_LIBJPEG = -1,
    /** The call does not fit the handle's state (or the handle failed before). */
    CJS_ERR_STATE = -2,
    CJS_ERR_NOMEM = -3,
    /** A system call failed; the errno is available from the handle. */
    CJS_ERR_IO = -4,
    CJS_ERR_ARGUMENT = -5,
    /** The caller's cancellation check said stop (cjs_png_encode). */
    CJS_ERR_CANCELLED = -6,
} cjs_status;

/** What kind of failure a libjpeg error was, so Swift can map it to a stable error code. */
typedef enum {
    CJS_FAILURE_NONE = 0,
    CJS_FAILURE_CORRUPT = 1,
    CJS_FAILURE_UNSUPPORTED = 2,
    CJS_FAILURE_TOO_LARGE = 3,
    CJS_FAILURE_EMPTY = 4,
    CJS_FAILURE_TOO_MANY_WARNINGS = 5,
    CJS_FAILURE_NOMEM = 6,
    /** Scan data ended early (the stream ended, or a marker other than a restart marker came
        inside a scan) and the decoder was not told to accept truncation. */
    CJS_FAILURE_TRUNCATED = 7,
    /** The stream has more scans than cjs_decoder_options.max_scans. */
    CJS_FAILURE_TOO_MANY_SCANS = 8,
    /** A system call failed (writing or reading the coefficient file); cjs_decoder_errno() says which. */
    CJS_FAILURE_IO = 9,
    /** cjs_decoder_request_stop was called. */
    CJS_FAILURE_STOPPED = 10,
} cjs_failure_kind;

typedef enum {
    CJS_COLOR_UNKNOWN = 0,
    CJS_COLOR_GRAYSCALE = 1,
    CJS_COLOR_RGB = 2,
    CJS_COLOR_YCBCR = 3,
    CJS_COLOR_CMYK = 4,
    CJS_COLOR_YCCK = 5,
} cjs_color_space;

/** Frees memory the shim returned to the caller (encoded bytes, tables). */
void cjs_free(void *pointer);
/** Loads a progress entry (acquire order). */
uint32_t cjs_load_progress(const uint32_t *entry);
/** Stores a progress entry (release order) and wakes whoever waits for it: for counters the caller
    keeps itself (previews). */
void cjs_store_progress(uint32_t *entry, uint32_t value);
/** Blocks until the entry is stored to (a futex wait), it no longer holds `seen`, or `timeout_ns`
    passed; returns at once for a timeout of 0 or less. Spurious returns are possible: look again. */
void cjs_wait_progress(const uint32_t *entry, uint32_t seen, int64_t timeout_ns);
/** Reads `count` bytes at `offset` of `fd` only if the page cache holds them: preadv2 with RWF_NOWAIT,
    which never waits for the disk. The bytes read, or -1 with errno (EAGAIN: they would need the disk;
    EOPNOTSUPP/ENOSYS: a kernel or file system without it). Callers treat a short count as a miss. */
long cjs_read_if_cached(int fd, void *destination, size_t count, int64_t offset);

#ifdef __cplusplus
}
#endif
#endif
