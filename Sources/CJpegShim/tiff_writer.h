/* tiff_writer.h: what the level encoders and the transcoder read of a TIFF writer (tiff_writer.c), and
   what the turned tiles (turned_tiles.c) ask of a level encoder (tiff_level_encoder.c). */
#ifndef CJS_TIFF_WRITER_H
#define CJS_TIFF_WRITER_H

#include "cjpeg_shim.h"

/* Level `level`'s description (its tables included), or NULL outside the pyramid. */
const cjs_tiff_level *tiff_writer_level(const cjs_tiff_writer *w, uint32_t level);
uint32_t tiff_writer_tile_size(const cjs_tiff_writer *w);

/* Encodes one tile of the encoder's level, tile_size x tile_size RGBA pixels (rows tile_size * 4 bytes
   apart, padded already), as the level's rows would be, and hands it to the writer at (column, row).
   CJS_ERR_LIBJPEG, CJS_ERR_NOMEM, CJS_ERR_IO (the writer's); not mixed with push_row. */
cjs_status tiff_level_encoder_put_tile(cjs_tiff_level_encoder *e, uint32_t column, uint32_t row, const uint8_t *tile);

#endif
