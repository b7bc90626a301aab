/*
 * turned_level.h: level 0 of a turned JPEG's TIFF from its coefficients, turned in the DCT domain as
 * jpegtran turns them: each block's coefficients transposed and their odd frequencies negated along a
 * flipped axis, the blocks themselves moved to their upright places. The source's coefficients come
 * from the transcoder's spill file (its iMCU rows as the ring held them); an upright tile row's blocks
 * are gathered from it, then each tile is entropy-coded (huffman.c) and handed to the writer.
 * Memory: one upright tile row of blocks of every component. Plain C, no libjpeg call.
 */
#ifndef CJS_TURNED_LEVEL_H
#define CJS_TURNED_LEVEL_H

#include <stddef.h>

#include "cjpeg_shim.h"
#include "transcode_plan.h"

/* Codes every tile of level 0 of `writer` as `turned` (transcode_plan_turn of `source`) says, from the
   iMCU rows of `source` in `fd` (`slot_bytes` each, every component's block rows in turn): 0 or an
   errno (ECANCELED once `should_stop(context)`, asked before each tile row, says so). */
int turned_level_write(const transcode_plan *source, const transcode_plan *turned, int fd, size_t slot_bytes,
                       cjs_tiff_writer *writer, int (*should_stop)(void *), void *context);

#endif
