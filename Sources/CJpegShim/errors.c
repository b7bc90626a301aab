/* errors.c: libjpeg error and warning handling without printing or exiting. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "errors.h"

static void error_exit(j_common_ptr cinfo) {
    cjs_error_mgr *err = (cjs_error_mgr *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    err->message_code = cinfo->err->msg_code;
    longjmp(err->jump, 1);
}

/*
 * Whether a warning says that scan data ended early: the stream ended (JWRN_JPEG_EOF), or the entropy
 * decoder met a marker inside a scan (JWRN_HIT_MARKER) that is not a restart marker. A restart marker
 * met early ends one damaged restart interval, and decoding resumes after it; any other marker (EOI,
 * the next SOS) means the rest of the scan is missing: truncation with a marker appended.
 */
static int is_truncation(j_common_ptr cinfo) {
    int code = cinfo->err->msg_code;
    if (code == JWRN_JPEG_EOF) return 1;
    if (code != JWRN_HIT_MARKER || !cinfo->is_decompressor) return 0;
    int marker = ((j_decompress_ptr)cinfo)->unread_marker;
    return !(marker >= JPEG_RST0 && marker <= JPEG_RST0 + 7);
}

/*
 * Whether a warning is what a stream that was cut (and accepted as such) goes on to give: the end of
 * the data, a marker met inside a scan, and, with restart markers, one "found marker 0xd9 instead of
 * RSTn" for each restart interval left. Those are not corrupt data: they do not count toward the limit,
 * which is for streams that are damaged (a cut file with restart markers gives two per interval).
 */
static int follows_truncation(j_common_ptr cinfo) {
    int code = cinfo->err->msg_code;
    if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER) return 1;
    if (code != JWRN_MUST_RESYNC) return 0;
    int marker = cinfo->err->msg_parm.i[0];
    return !(marker >= JPEG_RST0 && marker <= JPEG_RST0 + 7);
}

/* Warnings (msg_level < 0) are counted and kept, never printed; past the limit they become an error. */
static void emit_message(j_common_ptr cinfo, int msg_level) {
    cjs_error_mgr *err = (cjs_error_mgr *)cinfo->err;
    if (msg_level >= 0) return; /* trace messages */
    err->warnings++;
    cinfo->err->num_warnings++;
    (*cinfo->err->format_message)(cinfo, err->message);
    err->message_code = cinfo->err->msg_code;
    if (is_truncation(cinfo)) {
        err->saw_truncation = 1;
        if (err->refuses_truncation) {
            err->truncation_refused = 1;
            longjmp(err->jump, 1);
        }
    }
    if (err->saw_truncation && follows_truncation(cinfo)) return;
    if (err->warnings > err->warning_limit) {
        err->too_many_warnings = 1;
        longjmp(err->jump, 1);
    }
}

static void output_message(j_common_ptr cinfo) { (void)cinfo; }

void cjs_error_init(cjs_error_mgr *err, unsigned warning_limit) {
    jpeg_std_error(&err->pub);
    err->pub.error_exit = error_exit;
    err->pub.emit_message = emit_message;
    err->pub.output_message = output_message;
    err->message[0] = 0;
    err->message_code = 0;
    err->warnings = 0;
    err->warning_limit = warning_limit ? warning_limit : UINT_MAX;
    err->too_many_warnings = 0;
    err->refuses_truncation = 0;
    err->saw_truncation = 0;
    err->truncation_refused = 0;
    err->too_many_scans = 0;
    err->io_errno = 0;
    err->stopped = 0;
}

void cjs_error_too_many_scans(j_common_ptr cinfo, const char *message) {
    cjs_error_mgr *err = (cjs_error_mgr *)cinfo->err;
    snprintf(err->message, sizeof err->message, "%s", message);
    err->message_code = 0;
    err->too_many_scans = 1;
    longjmp(err->jump, 1);
}

void cjs_error_io(j_common_ptr cinfo, const char *what, int number) {
    cjs_error_mgr *err = (cjs_error_mgr *)cinfo->err;
    snprintf(err->message, sizeof err->message, "%s: %s", what, strerror(number));
    err->message_code = 0;
    err->io_errno = number ? number : EIO;
    longjmp(err->jump, 1);
}

void cjs_error_warn(j_common_ptr cinfo, const char *message) {
    cjs_error_mgr *err = (cjs_error_mgr *)cinfo->err;
    err->warnings++;
    cinfo->err->num_warnings++;
    snprintf(err->message, sizeof err->message, "%s", message);
    err->message_code = 0;
    if (err->warnings > err->warning_limit) {
        err->too_many_warnings = 1;
        longjmp(err->jump, 1);
    }
}

void cjs_error_stopped(j_common_ptr cinfo) {
    cjs_error_mgr *err = (cjs_error_mgr *)cinfo->err;
    snprintf(err->message, sizeof err->message, "the decode was stopped");
    err->message_code = 0;
    err->stopped = 1;
    longjmp(err->jump, 1);
}

int cjs_error_failure_kind(const cjs_error_mgr *err) {
    if (err->stopped) return CJS_FAILURE_STOPPED;
    if (err->io_errno) return CJS_FAILURE_IO;
    if (err->too_many_scans) return CJS_FAILURE_TOO_MANY_SCANS;
    if (err->truncation_refused) return CJS_FAILURE_TRUNCATED;
    if (err->too_many_warnings) return CJS_FAILURE_TOO_MANY_WARNINGS;
    switch (err->message_code) {
    case JERR_BAD_PRECISION:
    case JERR_NOT_COMPILED:
    case JERR_CONVERSION_NOTIMPL:
    case JERR_NOTIMPL:
    case JERR_ARITH_NOTIMPL:
        return CJS_FAILURE_UNSUPPORTED;
    case JERR_IMAGE_TOO_BIG:
    case JERR_WIDTH_OVERFLOW:
        return CJS_FAILURE_TOO_LARGE;
    case JERR_INPUT_EMPTY:
        return CJS_FAILURE_EMPTY;
    case JERR_OUT_OF_MEMORY:
    case JERR_VIRTUAL_BUG:
        return CJS_FAILURE_NOMEM;
    default:
        return CJS_FAILURE_CORRUPT;
    }
}

void cjs_cmyk_to_rgba(unsigned char *row, unsigned width) {
    for (unsigned x = 0; x < width; x++, row += 4) {
        unsigned c = row[0], m = row[1], y = row[2], k = row[3];
        /* (v * k + 127) / 255 equals floor(v * k / 255.0 + 0.5) for all 8-bit values. */
        row[0] = (unsigned char)((c * k + 127) / 255);
        row[1] = (unsigned char)((m * k + 127) / 255);
        row[2] = (unsigned char)((y * k + 127) / 255);
        row[3] = 255;
    }
}
