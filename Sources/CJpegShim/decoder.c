/* decoder.c: a push decoder over libjpeg's suspending data source. */
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "decoder.h"
#include "transcoder.h"

/* After an error the handle is poisoned; the coefficient file is closed at once (its disk freed). */
static void fail(cjs_decoder *d) {
    d->failed = 1;
    cjs_coefficients_release(&d->coefficients);
}

static const JOCTET fake_eoi[2] = {0xFF, JPEG_EOI};

static void source_init(j_decompress_ptr cinfo) { (void)cinfo; }
static void source_term(j_decompress_ptr cinfo) { (void)cinfo; }

/*
 * Called when libjpeg has used every byte. Before the end of input, suspend (return FALSE):
 * libjpeg keeps its position and retries after the next feed. After it, do what libjpeg's own
 * sources do (a warning and a fake EOI), but remember that the stream was truncated.
 */
static boolean source_fill(j_decompress_ptr cinfo) {
    cjs_decoder *d = decoder_of((j_common_ptr)cinfo);
    if (!d->end_of_input) return FALSE;
    if (d->total_fed == 0) ERREXIT(cinfo, JERR_INPUT_EMPTY);
    WARNMS(cinfo, JWRN_JPEG_EOF); /* longjmps unless truncation is allowed (errors.c) */
    d->src.next_input_byte = fake_eoi;
    d->src.bytes_in_buffer = 2;
    return TRUE;
}

static void source_skip(j_decompress_ptr cinfo, long count) {
    cjs_decoder *d = decoder_of((j_common_ptr)cinfo);
    if (count <= 0) return;
    size_t n = (size_t)count;
    if (n <= d->src.bytes_in_buffer) {
        d->src.next_input_byte += n;
        d->src.bytes_in_buffer -= n;
    } else {
        d->skip_pending += n - d->src.bytes_in_buffer;
        d->src.next_input_byte += d->src.bytes_in_buffer;
        d->src.bytes_in_buffer = 0;
    }
}

/*
 * Adds the blocks of scan `scan`'s components (its SOS just read: comps_in_scan and cur_comp_info are
 * its own) to the decoder's count, and refuses the stream once the scans cover the image's blocks
 * more than max_block_passes times over, past CJS_FREE_BLOCK_SCANS.
 */
static void count_scan_blocks(cjs_decoder *d, int scan) {
    j_decompress_ptr cinfo = &d->cinfo;
    d->counted_scan = scan;
    unsigned long long image_blocks = 0;
    for (int c = 0; c < cinfo->num_components; c++)
        image_blocks += (unsigned long long)cinfo->comp_info[c].width_in_blocks * cinfo->comp_info[c].height_in_blocks;
    for (int c = 0; c < cinfo->comps_in_scan && c < MAX_COMPS_IN_SCAN; c++) {
        const jpeg_component_info *component = cinfo->cur_comp_info[c];
        if (component) d->block_scans += (unsigned long long)component->width_in_blocks * component->height_in_blocks;
    }
    if (d->block_scans > CJS_FREE_BLOCK_SCANS + image_blocks * d->max_block_passes) {
        char message[JMSG_LENGTH_MAX];
        snprintf(message, sizeof message,
                 "scan %d: the scans so far cover the image's blocks %.1f times over, past the limit of %u",
                 scan, image_blocks ? (double)d->block_scans / (double)image_blocks : 0.0, d->max_block_passes);
        cjs_error_too_many_scans((j_common_ptr)cinfo, message);
    }
}

/*
 * libjpeg calls the progress monitor before each step of input (jpeg_start_decompress absorbs a
 * multi-scan image one consume_input call at a time), so a scan past the limit is refused as soon as
 * its SOS has been read, as djpeg -maxscans does.
 */
static void progress_monitor(j_common_ptr cinfo) {
    cjs_decoder *d = decoder_of((j_common_ptr)cinfo);
    int scan = ((j_decompress_ptr)cinfo)->input_scan_number;
    if (__atomic_load_n(&d->stop_requested, __ATOMIC_RELAXED)) cjs_error_stopped(cinfo);
    if (d->max_scans && scan > 0 && (uint32_t)scan > d->max_scans) {
        char message[JMSG_LENGTH_MAX];
        snprintf(message, sizeof message, "scan %d exceeds the limit of %u scans", scan, d->max_scans);
        cjs_error_too_many_scans(cinfo, message);
    }
    if (d->max_block_passes && scan > d->counted_scan) count_scan_blocks(d, scan);
}

cjs_status cjs_decoder_create(const cjs_decoder_options *options, cjs_decoder **out) {
    if (!out) return CJS_ERR_ARGUMENT;
    *out = NULL;
    cjs_decoder *d = calloc(1, sizeof *d);
    if (!d) return CJS_ERR_NOMEM;
    cjs_error_init(&d->err, options ? options->warning_limit : 0);
    d->err.refuses_truncation = options ? !options->allow_truncated : 0;
    d->max_scans = options ? options->max_scans : 0;
    d->max_block_passes = options ? options->max_block_passes : 0;
    d->cinfo.err = &d->err.pub;
    if (setjmp(d->err.jump)) { /* jpeg_create_decompress */
        free(d);
        return CJS_ERR_NOMEM;
    }
    jpeg_create_decompress(&d->cinfo);
    cjs_coefficients_install(&d->cinfo, &d->coefficients);
    d->src.init_source = source_init;
    d->src.fill_input_buffer = source_fill;
    d->src.skip_input_data = source_skip;
    d->src.resync_to_restart = jpeg_resync_to_restart;
    d->src.term_source = source_term;
    d->src.next_input_byte = NULL;
    d->src.bytes_in_buffer = 0;
    d->cinfo.src = &d->src;
    d->progress.progress_monitor = progress_monitor;
    d->cinfo.progress = &d->progress;
    d->stage = STAGE_HEADER;
    *out = d;
    return CJS_OK;
}

void cjs_decoder_destroy(cjs_decoder *d) {
    if (!d) return;
    jpeg_destroy_decompress(&d->cinfo); /* cannot fail: it only frees (the arrays' strategy too) */
    cjs_coefficients_release(&d->coefficients);
    transcoder_destroy(d->transcoder);
    decoder_plan_free(d);
    free(d->buffer);
    free(d);
}

cjs_status cjs_decoder_feed(cjs_decoder *d, const void *bytes, size_t length) {
    if (d->failed || d->end_of_input) return CJS_ERR_STATE;
    if (length == 0) return CJS_OK;
    if (!bytes) return CJS_ERR_ARGUMENT;
    const unsigned char *in = bytes;
    d->total_fed += length;
    if (d->stage == STAGE_DONE) { /* past the end-of-image marker: counted, never buffered */
        d->bytes_after_end += length;
        return CJS_OK;
    }
    if (d->skip_pending) {
        size_t n = d->skip_pending < length ? d->skip_pending : length;
        d->skip_pending -= n;
        in += n;
        length -= n;
        if (length == 0) return CJS_OK;
    }
    /* Keep only what libjpeg has not consumed: it may back up to the start of an MCU or marker. */
    size_t keep = d->src.bytes_in_buffer;
    if (keep + length > d->capacity) {
        /* Geometric growth: a stream libjpeg holds whole (arithmetic coding) is copied O(n) times in all. */
        size_t capacity = keep + length;
        if (capacity < d->capacity * 2) capacity = d->capacity * 2;
        unsigned char *grown = malloc(capacity);
        if (!grown) return CJS_ERR_NOMEM;
        if (keep) memcpy(grown, d->src.next_input_byte, keep);
        free(d->buffer);
        d->buffer = grown;
        d->capacity = capacity;
    } else if (keep && d->src.next_input_byte != d->buffer) {
        memmove(d->buffer, d->src.next_input_byte, keep);
    }
    memcpy(d->buffer + keep, in, length);
    d->src.next_input_byte = d->buffer;
    d->src.bytes_in_buffer = keep + length;
    return CJS_OK;
}

cjs_status cjs_decoder_end_input(cjs_decoder *d) {
    if (d->failed) return CJS_ERR_STATE;
    d->end_of_input = 1;
    return CJS_OK;
}

static int color_space_of(J_COLOR_SPACE space) {
    switch (space) {
    case JCS_GRAYSCALE: return CJS_COLOR_GRAYSCALE;
    case JCS_RGB: return CJS_COLOR_RGB;
    case JCS_YCbCr: return CJS_COLOR_YCBCR;
    case JCS_CMYK: return CJS_COLOR_CMYK;
    case JCS_YCCK: return CJS_COLOR_YCCK;
    default: return CJS_COLOR_UNKNOWN;
    }
}

static void describe(const cjs_decoder *d, cjs_header *out) {
    const struct jpeg_decompress_struct *c = &d->cinfo;
    out->width = c->image_width;
    out->height = c->image_height;
    out->components = c->num_components;
    out->color_space = color_space_of(c->jpeg_color_space);
    out->bits_per_sample = c->data_precision;
    out->is_progressive = c->progressive_mode ? 1 : 0;
    out->is_arithmetic = c->arith_code ? 1 : 0;
}

cjs_status cjs_decoder_read_header(cjs_decoder *d, cjs_header *out) {
    if (d->failed) return CJS_ERR_STATE;
    if (d->stage != STAGE_HEADER) {
        if (out) describe(d, out);
        return CJS_OK;
    }
    if (setjmp(d->err.jump)) { /* jpeg_read_header */
        fail(d);
        return CJS_ERR_LIBJPEG;
    }
    int r = jpeg_read_header(&d->cinfo, TRUE);
    if (r == JPEG_SUSPENDED) return CJS_NEED_DATA;
    if (r != JPEG_HEADER_OK) ERREXIT(&d->cinfo, JERR_NO_IMAGE);
    if (d->cinfo.jpeg_color_space == JCS_CMYK || d->cinfo.jpeg_color_space == JCS_YCCK) {
        d->cinfo.out_color_space = JCS_CMYK;
        d->cmyk = 1;
    } else {
        d->cinfo.out_color_space = JCS_EXT_RGBX;
    }
    d->stage = STAGE_HEADER_READ;
    if (out) describe(d, out);
    return CJS_OK;
}

/*
 * libjpeg's arithmetic decoder cannot suspend (JERR_CANT_SUSPEND): an arithmetic-coded image is
 * decoded only once all of its bytes are in, so for those the decoder holds the whole stream.
 */
static int must_wait_for_all_input(const cjs_decoder *d) {
    return d->cinfo.arith_code && !d->end_of_input;
}

cjs_status cjs_decoder_set_scale(cjs_decoder *d, uint32_t denominator, uint32_t *out_width, uint32_t *out_height) {
    if (d->failed || d->stage != STAGE_HEADER_READ) return CJS_ERR_STATE;
    if (denominator != 1 && denominator != 2 && denominator != 4 && denominator != 8) return CJS_ERR_ARGUMENT;
    if (setjmp(d->err.jump)) { /* jpeg_calc_output_dimensions */
        fail(d);
        return CJS_ERR_LIBJPEG;
    }
    d->cinfo.scale_num = 1;
    d->cinfo.scale_denom = denominator;
    jpeg_calc_output_dimensions(&d->cinfo);
    *out_width = d->cinfo.output_width;
    *out_height = d->cinfo.output_height;
    return CJS_OK;
}

/*
 * Whether every coefficient of every component will be complete once the scan being read ends: a
 * progressive image's coef_bits, updated when a scan starts, are 0 (no bit left to refine) for all;
 * a single-scan image's first scan is all of it (buffered only when transcoding). Then this scan is
 * the last that can change the image, and its rows can be output as it arrives.
 */
static int coefficients_complete(j_decompress_ptr cinfo) {
    if (!jpeg_has_multiple_scans(cinfo)) return 1;
    if (!cinfo->progressive_mode || !cinfo->coef_bits) return 0;
    for (int ci = 0; ci < cinfo->num_components; ci++)
        for (int k = 0; k < DCTSIZE2; k++)
            if (cinfo->coef_bits[ci][k] != 0) return 0;
    return 1;
}

cjs_status cjs_decoder_start(cjs_decoder *d) {
    if (d->failed || d->stage < STAGE_HEADER_READ) return CJS_ERR_STATE;
    if (d->stage > STAGE_HEADER_READ) return CJS_OK;
    if (must_wait_for_all_input(d)) return CJS_NEED_DATA;
    if (setjmp(d->err.jump)) { /* jpeg_start_decompress, jpeg_consume_input, jpeg_start_output */
        fail(d);
        return CJS_ERR_LIBJPEG;
    }
    if (!d->decompress_started) {
        if (jpeg_has_multiple_scans(&d->cinfo) || d->transcoder) {
            d->cinfo.buffered_image = TRUE;
            d->buffered = 1;
        }
        /* FALSE means suspended: retry after the next feed. In buffered-image mode it returns at once. */
        if (!jpeg_start_decompress(&d->cinfo)) return CJS_NEED_DATA;
        d->decompress_started = 1;
    }
    if (d->buffered) {
        /* Absorb scans until the one that completes every coefficient has started, or the end. */
        while (!coefficients_complete(&d->cinfo)) {
            progress_monitor((j_common_ptr)&d->cinfo); /* the scan limit, and stop requests */
            int r = jpeg_consume_input(&d->cinfo);
            if (r == JPEG_SUSPENDED) return CJS_NEED_DATA;
            if (r == JPEG_REACHED_EOI) break;
        }
        /* Never suspends here: no colour quantization, so no dummy pass. */
        if (!jpeg_start_output(&d->cinfo, d->cinfo.input_scan_number)) ERREXIT(&d->cinfo, JERR_CANT_SUSPEND);
    }
    d->stage = STAGE_SCANNING;
    return CJS_OK;
}

cjs_status cjs_decoder_read_rows(cjs_decoder *d, void *dst, size_t stride, uint32_t max_rows,
                                 uint32_t *out_rows) {
    *out_rows = 0;
    if (d->failed || d->stage < STAGE_SCANNING) return CJS_ERR_STATE;
    if (d->stage > STAGE_SCANNING) return CJS_DONE;
    if (!dst || stride < (size_t)d->cinfo.output_width * 4) return CJS_ERR_ARGUMENT;
    if (must_wait_for_all_input(d)) return CJS_NEED_DATA;
    volatile uint32_t done = 0;
    unsigned char *base = dst;
    if (setjmp(d->err.jump)) { /* jpeg_read_scanlines */
        fail(d);
        *out_rows = done;
        return CJS_ERR_LIBJPEG;
    }
    while (done < max_rows && d->cinfo.output_scanline < d->cinfo.output_height) {
        JSAMPROW rows[16];
        uint32_t want = max_rows - done;
        if (want > 16) want = 16;
        for (uint32_t i = 0; i < want; i++) rows[i] = base + (size_t)(done + i) * stride;
        JDIMENSION got = jpeg_read_scanlines(&d->cinfo, rows, want);
        if (d->cmyk)
            for (JDIMENSION i = 0; i < got; i++) cjs_cmyk_to_rgba(rows[i], d->cinfo.output_width);
        done += got;
        if (got == 0) break; /* suspended */
    }
    *out_rows = done;
    if (d->cinfo.output_scanline >= d->cinfo.output_height) {
        /* Every iMCU row has been read: the last ones go to the transcoder. */
        int error = cjs_coefficients_output_done(&d->coefficients);
        if (error) cjs_error_io((j_common_ptr)&d->cinfo, "cannot write level 0's tiles", error);
        d->stage = STAGE_FINISHING;
        return CJS_DONE;
    }
    return done < max_rows ? CJS_NEED_DATA : CJS_OK;
}

/* A scan after the output scan: a warning (and past the limit, an error), like corrupt data. */
static void warn_late_scan(cjs_decoder *d) {
    char message[JMSG_LENGTH_MAX];
    snprintf(message, sizeof message, "scan %d comes after every coefficient was complete: ignored",
             d->cinfo.input_scan_number);
    cjs_error_warn((j_common_ptr)&d->cinfo, message);
}

cjs_status cjs_decoder_finish(cjs_decoder *d) {
    if (d->failed || d->stage < STAGE_FINISHING) return CJS_ERR_STATE;
    if (d->stage == STAGE_DONE) return CJS_DONE;
    if (must_wait_for_all_input(d)) return CJS_NEED_DATA;
    if (setjmp(d->err.jump)) { /* jpeg_finish_output, jpeg_consume_input, jpeg_finish_decompress */
        fail(d);
        return CJS_ERR_LIBJPEG;
    }
    if (d->buffered) {
        if (!d->output_finished) {
            /* Reads the rest of the output scan, up to the next SOS or EOI. */
            if (!jpeg_finish_output(&d->cinfo)) return CJS_NEED_DATA;
            d->output_finished = 1;
            if (d->cinfo.input_scan_number > d->cinfo.output_scan_number) warn_late_scan(d);
        }
        /* Scans after the one the image came from: a conforming stream has none (every coefficient
           was complete). They are read to the end, counted as warnings, and change nothing. */
        while (!jpeg_input_complete(&d->cinfo)) {
            progress_monitor((j_common_ptr)&d->cinfo);
            int r = jpeg_consume_input(&d->cinfo);
            if (r == JPEG_SUSPENDED) return CJS_NEED_DATA;
            if (r == JPEG_REACHED_SOS) warn_late_scan(d);
        }
    }
    if (!jpeg_finish_decompress(&d->cinfo)) return CJS_NEED_DATA;
    d->stage = STAGE_DONE;
    return CJS_DONE;
}

uint32_t cjs_decoder_rows_read(const cjs_decoder *d) {
    return d->stage >= STAGE_SCANNING ? d->cinfo.output_scanline : 0;
}
size_t cjs_decoder_bytes_buffered(const cjs_decoder *d) { return d->src.bytes_in_buffer; }
uint32_t cjs_decoder_warning_count(const cjs_decoder *d) { return d->err.warnings; }
int32_t cjs_decoder_is_truncated(const cjs_decoder *d) { return d->err.saw_truncation; }
uint64_t cjs_decoder_bytes_after_end(const cjs_decoder *d) { return d->bytes_after_end; }
const char *cjs_decoder_message(const cjs_decoder *d) { return d->err.message; }
int32_t cjs_decoder_message_code(const cjs_decoder *d) { return d->err.message_code; }
int32_t cjs_decoder_failure_kind(const cjs_decoder *d) {
    return d->failed ? cjs_error_failure_kind(&d->err) : CJS_FAILURE_NONE;
}
int32_t cjs_decoder_errno(const cjs_decoder *d) { return d->err.io_errno; }

void cjs_decoder_request_stop(cjs_decoder *d) { __atomic_store_n(&d->stop_requested, 1, __ATOMIC_RELAXED); }

uint64_t cjs_decoder_coefficient_bytes(const cjs_decoder *d) {
    if (d->stage < STAGE_HEADER_READ) return 0;
    return cjs_coefficients_needed((j_decompress_ptr)&d->cinfo);
}

cjs_status cjs_decoder_use_coefficient_file(cjs_decoder *d, int fd, size_t window_bytes) {
    if (d->failed || d->stage != STAGE_HEADER_READ || fd < 0) {
        if (fd >= 0) close(fd);
        return fd < 0 ? CJS_ERR_ARGUMENT : CJS_ERR_STATE;
    }
    coefficient_store *store = coefficient_file_create(fd, window_bytes); /* closes fd on failure */
    if (!store) return CJS_ERR_NOMEM;
    cjs_coefficients_use(&d->coefficients, &coefficient_file_methods, store);
    return CJS_OK;
}

uint64_t cjs_decoder_coefficient_file_bytes(const cjs_decoder *d) {
    return cjs_coefficients_file_bytes(&d->coefficients);
}
