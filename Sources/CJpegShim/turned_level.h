/*
 * turned_level.h: level 0 of a turned JPEG's TIFF from its coefficients, turned in the DCT domain as
 * jpegtran turns them: each block's coefficients transposed and their odd frequencies negated along a
 * flipped axis, the blocks moved to their upright places. An upright tile is a tile-sized square of
 * the stored image (its flipped sides are whole MCUs: transcode_plan_turn), so the stored iMCU rows
 * fall into bands, anchored at the stored image's top, or its bottom when its rows are flipped: once a
 * band's rows are decoded, the upright tiles it holds (a tile row, or a tile column when transposed)
 * are entropy-coded (huffman.c) and handed to the writer. Plain C, no libjpeg call.
 */
#ifndef CJS_TURNED_LEVEL_H
#define CJS_TURNED_LEVEL_H

#include "cjpeg_shim.h"
#include "transcode_plan.h"

typedef struct turned_coder turned_coder;

/* Stored block row `y` of component `component` (its block coordinates), valid during the call. */
typedef JBLOCKROW (*turned_row_at)(void *context, int component, JDIMENSION y);

/* A coder of the upright tiles `turned` (transcode_plan_turn of `source`) describes; both plans must
   outlive it. 0, ENOMEM, or EINVAL when a band would not be whole iMCU rows. */
int turned_coder_create(const transcode_plan *source, const transcode_plan *turned, turned_coder **out);
void turned_coder_destroy(turned_coder *c);
/* Stored iMCU rows in a band (its most). */
JDIMENSION turned_band_rows(const turned_coder *c);
/* The end of the band of stored iMCU rows that starts at `start` (the first band may be short). */
JDIMENSION turned_band_end(const turned_coder *c, JDIMENSION start);
/* Codes the upright tiles of the band [start, turned_band_end(start)) into level 0 of `writer`,
   reading the stored block rows through `stored_row`: 0 or an errno. */
int turned_coder_band(turned_coder *c, JDIMENSION start, turned_row_at stored_row, void *context, cjs_tiff_writer *writer);

#endif
