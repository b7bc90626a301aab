/*
 * transcoder.h: level 0 of a TIFF from a JPEG's coefficients. A coefficient sink (coefficient_sink.h)
 * whose committed iMCU rows a thread of its own entropy-codes (huffman.c) into each tile column's
 * stream; a tile row's tiles go to the TIFF writer as soon as its last MCU row is coded. Memory: the
 * ring of iMCU rows and the tiles' bytes. Calls run one way: it calls huffman.c and tiff_writer.c.
 */
#ifndef CJS_TRANSCODER_H
#define CJS_TRANSCODER_H

#include "cjpeg_shim.h"
#include "coefficient_sink.h"
#include "transcode_plan.h"

typedef struct transcoder transcoder;

/* Starts a transcoder of `plan` (taken over, freed by destroy) into level 0 of `writer`. `stream`: the
   ring is the decoder's coefficient array (its rows are cleared once coded), else rows are copied in.
   CJS_ERR_NOMEM (the plan is freed then too). */
cjs_status transcoder_create(transcode_plan *plan, cjs_tiff_writer *writer, int stream, transcoder **out);
/* A turned image's transcoder: the committed iMCU rows go to `spill_fd` (an empty read-write file,
   taken over in every case) as the ring holds them; once all are in, transcoder_write_turned codes
   level 0 of the upright image as `turned` (transcode_plan_turn of `plan`; taken over) says. */
cjs_status transcoder_create_turned(transcode_plan *plan, transcode_plan *turned, int spill_fd, cjs_tiff_writer *writer,
                                    int stream, transcoder **out);
/* Waits until every iMCU row is spilled, then has the transcoder's thread code the turned level 0
   into `writer` (which must outlive transcoder_wait_turned or destroy): 0 or an errno (EINVAL for a
   transcoder that is not turned, or was given a writer before). */
int transcoder_write_turned(transcoder *t, cjs_tiff_writer *writer);
/* Waits until the turned level 0 is coded: 0 or an errno. */
int transcoder_wait_turned(transcoder *t);
/* The sink the coefficient store hands the rows to; lives as long as the transcoder. */
const coefficient_sink *transcoder_sink(transcoder *t);
/* Waits until every iMCU row is coded and every tile written: 0 or an errno. */
int transcoder_wait(transcoder *t);
/* Waits until every committed iMCU row is coded (its complete tile rows written): 0 or an errno. */
int transcoder_sync(transcoder *t);
/* Stops the thread (unfinished work is dropped) and frees everything. NULL is allowed. */
void transcoder_destroy(transcoder *t);

#endif
