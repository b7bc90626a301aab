/* decoder_transcode.c: the decoder's side of level 0 from the coefficients (cjs_tiff.h): the plan, the
   transcoder as the coefficient store's sink, and the wait for its last tiles. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"
#include "transcoder.h"

void decoder_plan_free(cjs_decoder *d) {
    transcode_plan *plans = d->plan;
    if (!plans) return;
    transcode_plan_free(&plans[0]);
    transcode_plan_free(&plans[1]);
    free(plans);
    d->plan = NULL;
}

cjs_status cjs_decoder_transcode_plan(cjs_decoder *d, uint32_t tile_size, int32_t orientation, cjs_tiff_level *level) {
    if (d->failed || d->stage != STAGE_HEADER_READ || d->transcoder) return CJS_ERR_STATE;
    if (orientation < 1 || orientation > 8) return CJS_ERR_ARGUMENT;
    decoder_plan_free(d);
    if (!(d->plan = calloc(2, sizeof(transcode_plan)))) return CJS_ERR_NOMEM;
    transcode_plan *plan = d->plan;
    char reason[96];
    if (transcode_plan_make(&d->cinfo, tile_size, plan, reason, sizeof reason) != 0) {
        snprintf(d->err.message, sizeof d->err.message, "level 0 cannot be copied from this JPEG: %s", reason);
        decoder_plan_free(d);
        return CJS_ERR_ARGUMENT;
    }
    if (orientation != 1) {
        if (transcode_plan_turn(&plan[0], orientation, &plan[1], reason, sizeof reason) != 0) {
            snprintf(d->err.message, sizeof d->err.message,
                     "level 0 cannot be copied from this JPEG turned upright (orientation %d): %s", orientation, reason);
            decoder_plan_free(d);
            return CJS_ERR_ARGUMENT;
        }
        plan = &plan[1];
    }
    memset(level, 0, sizeof *level);
    level->width = plan->width;
    level->height = plan->height;
    level->photometric = plan->photometric;
    level->h_subsampling = plan->components == 3 ? (uint16_t)plan->component[0].h : 1;
    level->v_subsampling = plan->components == 3 ? (uint16_t)plan->component[0].v : 1;
    level->jpeg_tables = plan->tables;
    level->jpeg_tables_length = plan->tables_length;
    return CJS_OK;
}

cjs_status cjs_decoder_transcode_into(cjs_decoder *d, cjs_tiff_writer *writer) {
    transcode_plan *plans = d->plan;
    if (d->failed || d->stage != STAGE_HEADER_READ || d->transcoder || !plans || !writer) return CJS_ERR_STATE;
    /* A single-scan image decodes straight into the ring; a multi-scan one keeps its arrays where they
       were put, and its rows are copied into the ring as the output pass reads them. */
    int stream = !jpeg_has_multiple_scans(&d->cinfo);
    int turned = plans[1].orientation != 0;
    cjs_status status = transcoder_create(&plans[0], turned ? &plans[1] : NULL, writer, stream, &d->transcoder);
    if (!turned) transcode_plan_free(&plans[1]);
    free(d->plan); /* their contents belong to the transcoder now (or were freed) */
    d->plan = NULL;
    if (status != CJS_OK) return status;
    const coefficient_sink *sink = transcoder_sink(d->transcoder);
    if (stream) {
        coefficient_store *store = coefficient_stream_create(sink);
        if (!store) return CJS_ERR_NOMEM;
        cjs_coefficients_use(&d->coefficients, &coefficient_stream_methods, store);
    }
    cjs_coefficients_tap(&d->coefficients, sink);
    /* The tap reads the rows as libjpeg's plain output pass does; smoothing reads them otherwise. */
    d->cinfo.do_block_smoothing = FALSE;
    return CJS_OK;
}

cjs_status cjs_decoder_transcode_wait(cjs_decoder *d) {
    if (!d->transcoder) return CJS_ERR_STATE;
    if (d->failed) return CJS_ERR_STATE;
    if (d->stage != STAGE_DONE) return CJS_ERR_STATE;
    int error = transcoder_wait(d->transcoder);
    if (!error) return CJS_OK;
    d->failed = 1;
    d->err.io_errno = error;
    snprintf(d->err.message, sizeof d->err.message, "cannot write level 0's tiles: %s", strerror(error));
    return CJS_ERR_IO;
}

cjs_status cjs_decoder_transcode_sync(cjs_decoder *d) {
    if (!d->transcoder) return CJS_ERR_STATE;
    int error = transcoder_sync(d->transcoder);
    if (!error) return CJS_OK;
    d->err.io_errno = error;
    return CJS_ERR_IO;
}
