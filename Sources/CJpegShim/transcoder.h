/*
 * transcoder.h: level 0 of a TIFF from a JPEG's coefficients. A coefficient sink (coefficient_sink.h)
 * whose committed iMCU rows a thread of its own entropy-codes (huffman.c) into each tile column's
 * stream; a tile row's tiles go to the TIFF writer as soon as its last MCU row is coded. A turned
 * image's tiles are coded a band of rows at a time, turned (turned_level.c). Memory: the ring of iMCU
 * rows (a turned image's holds two bands of a tile's rows more, at most the image's) and the tiles' bytes. Calls run one way: it calls
 * huffman.c, turned_level.c and tiff_writer.c.
 */
#ifndef CJS_TRANSCODER_H
#define CJS_TRANSCODER_H

#include "cjpeg_shim.h"
#include "coefficient_sink.h"
#include "transcode_plan.h"

typedef struct transcoder transcoder;

/* Starts a transcoder of `plan` (taken over, freed by destroy) into level 0 of `writer`; of the upright
   image `turned` describes (transcode_plan_turn of `plan`, taken over too) when it is not NULL: a band
   of iMCU rows at a time, as many as a tile's (turned_level.h). `stream`: the ring is the decoder's
   coefficient array (its rows are cleared once coded), else rows are copied in. CJS_ERR_NOMEM (the
   plans are freed then too). */
cjs_status transcoder_create(transcode_plan *plan, transcode_plan *turned, cjs_tiff_writer *writer, int stream,
                             transcoder **out);
/* The sink the coefficient store hands the rows to; lives as long as the transcoder. */
const coefficient_sink *transcoder_sink(transcoder *t);
/* Waits until every iMCU row is coded and every tile written: 0 or an errno. */
int transcoder_wait(transcoder *t);
/* Waits until every committed iMCU row is coded (its complete tile rows written): 0 or an errno. */
int transcoder_sync(transcoder *t);
/* Stops the thread (unfinished work is dropped) and frees everything. NULL is allowed. */
void transcoder_destroy(transcoder *t);

#endif
