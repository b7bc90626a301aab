/*
 * decoder.h: the push decoder's state, shared by decoder.c (the decode) and decoder_transcode.c (level 0
 * of a TIFF from the coefficients). Calls run one way: both call coefficients.c and transcoder.c, and
 * neither calls the other.
 */
#ifndef CJS_DECODER_INTERNAL_H
#define CJS_DECODER_INTERNAL_H

#include "coefficients.h"
#include "errors.h"

typedef struct transcoder transcoder;

enum stage { STAGE_HEADER, STAGE_HEADER_READ, STAGE_SCANNING, STAGE_FINISHING, STAGE_DONE };

struct cjs_decoder {
    struct jpeg_decompress_struct cinfo; /* first: the decoder is found from cinfo */
    cjs_error_mgr err;
    struct jpeg_source_mgr src;
    struct jpeg_progress_mgr progress; /* only to count scans (max_scans, max_block_passes) */
    uint32_t max_scans;
    uint32_t max_block_passes;
    int counted_scan;                  /* the last scan whose blocks are in block_scans */
    unsigned long long block_scans;    /* blocks of every scan so far, each scan's components' */
    int stop_requested;      /* set from any thread (atomically) by cjs_decoder_request_stop */
    unsigned long long bytes_after_end;
    unsigned char *buffer;   /* holds the bytes libjpeg has not consumed yet, then new ones */
    size_t capacity;
    size_t skip_pending;     /* bytes libjpeg asked to skip that have not arrived yet */
    unsigned long long total_fed;
    int end_of_input;
    int failed;
    int cmyk;                /* decode as CMYK, convert to RGB ourselves */
    enum stage stage;
    /*
     * Multi-scan images are decoded in buffered-image mode: input is absorbed scan by scan
     * (jpeg_consume_input), and the one output pass starts at the SOS of the scan after which every
     * coefficient is complete (or at EOI), so the image's rows come out while that last scan is
     * still arriving instead of after it.
     */
    int buffered;
    int decompress_started;  /* jpeg_start_decompress returned TRUE */
    int output_finished;     /* jpeg_finish_output returned TRUE */
    cjs_coefficients coefficients; /* the whole-image arrays' strategy, and the tap */
    transcoder *transcoder;        /* level 0 of a TIFF from the coefficients, or NULL */
    /* Two transcode_plans made and not yet handed to a transcoder: the stored JPEG's, and for a
       turned image, its upright tiles' (orientation 0 when there is none). */
    void *plan;
};

/* Frees the plans (decoder_transcode.c). */
void decoder_plan_free(cjs_decoder *d);

/* The decoder that owns `cinfo`. */
static inline cjs_decoder *decoder_of(j_common_ptr cinfo) { return (cjs_decoder *)(void *)cinfo; }

#endif
