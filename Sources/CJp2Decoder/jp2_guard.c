/* jp2_guard.c: OpenJPEG's assertions as a decode's failure, not the process's end.
 *
 * Debian builds OpenJPEG 2.5.0 with its assert()s, and its HTJ2K block decoder (ht_dec.c) asserts on what
 * a code-block holds: a corrupt or hostile one (a MEL byte after a 0xFF above 0x8F, ht_dec.c:319; a
 * significance state the data contradicts, ht_dec.c:2046...) calls glibc's __assert_fail, which aborts.
 *
 * This file defines __assert_fail. The executable's definition comes first in the dynamic linker's
 * search, so libopenjp2's assertions (and any other library's) land here. On a thread inside a guarded
 * OpenJPEG call, it longjmps back to that call's setjmp: only OpenJPEG's C frames are left, no Swift
 * frame in between (the calls below are the only guarded ones, and they call back only into
 * jp2_stream.c's C reads, which are not active when a block decoder asserts). Elsewhere it does what
 * glibc does: the message on stderr, then abort().
 *
 * What a longjmp leaves behind: the codec is only destroyed afterwards (its structures own what the
 * decode allocated), but the code-block's job record (80 bytes, opj_t1_decode_cblks') and the tile
 * decode's mutex (40 bytes, opj_tcd_t1_decode's), freed by the calls that did not return, stay
 * allocated: 120 bytes a caught assertion, one a failed image. Under LeakSanitizer, allocations made
 * inside a guarded call are not reported (__lsan_disable): those two are known, and whatever else a
 * call allocates is owned by the codec or the image, which are destroyed by their owner, whose
 * allocations outside these calls are still checked.
 * Guarded calls run one codec on the calling thread: OpenJPEG's worker threads' assertions would not
 * be caught, so HTJ2K (where they happen) is decoded on one thread (jp2_open_codec). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jp2_internal.h"

extern char *program_invocation_short_name; /* glibc's, as its own message uses */

/* The guarded call's return point on this thread, and what failed. */
static _Thread_local jmp_buf *guard;
static _Thread_local char failed[200];

void __assert_fail(const char *assertion, const char *file, unsigned int line, const char *function)
    __attribute__((noreturn));

void __assert_fail(const char *assertion, const char *file, unsigned int line, const char *function) {
    jmp_buf *target = guard;
    if (target) {
        guard = NULL;
        const char *base = file ? strrchr(file, '/') : NULL;
        snprintf(failed, sizeof failed, "%s:%u: %s", base ? base + 1 : file ? file : "?", line,
                 assertion ? assertion : "?");
        longjmp(*target, 1);
    }
    fprintf(stderr, "%s: %s:%u: %s%sAssertion `%s' failed.\n", program_invocation_short_name, file ? file : "?", line,
            function ? function : "", function ? ": " : "", assertion ? assertion : "?");
    fflush(stderr);
    abort();
}

/* LeakSanitizer's switch for this thread, where it is linked in (sanitized builds). */
extern void __lsan_disable(void) __attribute__((weak));
extern void __lsan_enable(void) __attribute__((weak));

static void leaks_unchecked(int unchecked) {
    if (unchecked && __lsan_disable) __lsan_disable();
    if (!unchecked && __lsan_enable) __lsan_enable();
}

static void take_failure(char *message, size_t capacity) {
    if (message && capacity) snprintf(message, capacity, "%s", failed);
}

int jp2_guarded_read_header(opj_stream_t *stream, opj_codec_t *codec, opj_image_t **image, char *message, size_t capacity) {
    jmp_buf here;
    volatile int result = 0;
    leaks_unchecked(1);
    if (setjmp(here) == 0) {
        guard = &here;
        result = opj_read_header(stream, codec, image) ? 1 : 0;
        guard = NULL;
    } else {
        take_failure(message, capacity);
        result = -1;
    }
    leaks_unchecked(0);
    return result;
}

int jp2_guarded_decode(opj_codec_t *codec, opj_stream_t *stream, opj_image_t *image, char *message, size_t capacity) {
    jmp_buf here;
    volatile int result = 0;
    leaks_unchecked(1);
    if (setjmp(here) == 0) {
        guard = &here;
        result = opj_decode(codec, stream, image) ? 1 : 0;
        guard = NULL;
    } else {
        take_failure(message, capacity);
        result = -1;
    }
    leaks_unchecked(0);
    return result;
}
