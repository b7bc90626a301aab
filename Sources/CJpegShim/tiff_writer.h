/* tiff_writer.h: what the level encoders and the transcoder read of a TIFF writer (tiff_writer.c). */
#ifndef CJS_TIFF_WRITER_H
#define CJS_TIFF_WRITER_H

#include "cjpeg_shim.h"

/* Level `level`'s description (its tables included), or NULL outside the pyramid. */
const cjs_tiff_level *tiff_writer_level(const cjs_tiff_writer *w, uint32_t level);
uint32_t tiff_writer_tile_size(const cjs_tiff_writer *w);

#endif
