/* errors.h: the error manager shared by the decoder, the encoder and the reference decodes. */
#ifndef CJS_ERRORS_H
#define CJS_ERRORS_H

#include <setjmp.h>
#include <stdio.h>
#include <jpeglib.h>
#include <jerror.h>

#include "cjpeg_shim.h"

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
    int message_code;
    unsigned warnings;
    unsigned warning_limit;
    int too_many_warnings;
    /** Fail at the first sign of truncated scan data instead of warning (decoders only). */
    int refuses_truncation;
    /** Set when a warning meant truncated scan data (also when it was accepted). */
    int saw_truncation;
    /** The failure was a refused truncation, or too many scans. */
    int truncation_refused;
    int too_many_scans;
    /** A system call failed (the coefficient file): its errno, else 0. */
    int io_errno;
    /** The decode was stopped on request. */
    int stopped;
} cjs_error_mgr;

/** Installs the error manager: errors longjmp to `jump`, warnings are counted, nothing prints. */
void cjs_error_init(cjs_error_mgr *err, unsigned warning_limit);
/** Fails the decode now as CJS_FAILURE_TOO_MANY_SCANS, with `message`. */
void cjs_error_too_many_scans(j_common_ptr cinfo, const char *message);
/** Fails the decode now as CJS_FAILURE_IO: "`what`: strerror(number)". */
void cjs_error_io(j_common_ptr cinfo, const char *what, int number);
/** Counts a warning of the shim's own (`message`), as corrupt data: past the limit, an error. */
void cjs_error_warn(j_common_ptr cinfo, const char *message);
/** Fails the decode now as CJS_FAILURE_STOPPED. */
void cjs_error_stopped(j_common_ptr cinfo);
/** Maps the last error's libjpeg code to a cjs_failure_kind. */
int cjs_error_failure_kind(const cjs_error_mgr *err);

/** Converts Adobe (inverted) CMYK pixels in place to RGBA: R = C*K/255 rounded, alpha 255. */
void cjs_cmyk_to_rgba(unsigned char *row, unsigned width);

#endif
