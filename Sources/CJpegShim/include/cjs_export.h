/*
 * cjs_export.h: encoded tiles (DeepZoom's: a tile size, an overlap) straight from a level's rows; PNG.
 */
#ifndef CJS_EXPORT_H
#define CJS_EXPORT_H

#include "cjs_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cjs_export cjs_export;

typedef enum {
    CJS_TILE_JPEG = 1,
    CJS_TILE_PNG = 2,
} cjs_tile_format;

typedef struct {
    /** Tile side without the overlap, 1...8192. */
    uint32_t tile_size;
    /** Pixels a tile shares with each neighbour (DeepZoom's Overlap), below tile_size. */
    uint32_t overlap;
    /** A cjs_tile_format. */
    int32_t format;
    /** JPEG quality, 1...100. */
    int32_t quality;
    /** Encoder threads, 1...16. */
    uint32_t threads;
    /** Encoded tiles waiting to be taken before the encoders wait (0: 256). */
    uint32_t queue_limit;
    /** An ICC profile written into every tile (JPEG APP2 chunks, PNG iCCP), copied at create; NULL: none. */
    const void *icc_profile;
    size_t icc_profile_length;
} cjs_export_options;

/** One encoded tile: its level (0 is full size), its column and row, its bytes (the export's until
    released). */
typedef struct {
    uint32_t level;
    uint32_t column;
    uint32_t row;
    const void *bytes;
    size_t length;
} cjs_export_tile;

/**
 * Creates an export of `count` levels of the given sizes (level 0 first, each usually the 2x2
 * shrink of the one before) and starts its encoder threads. Tile (c, r) of a level covers columns
 * [max(0, c*T - overlap), min(width, (c+1)*T + overlap)) and the same for rows. Memory: two strips
 * of T + 2 * overlap rows per level, and the queue of encoded tiles.
 */
cjs_status cjs_export_create(const cjs_export_options *options, const uint32_t *widths, const uint32_t *heights,
                             uint32_t count, cjs_export **out);
/** Stops and joins the encoders (work not done is dropped) and frees everything. */
void cjs_export_destroy(cjs_export *e);
/** The next RGBA row (width * 4 bytes, the 4th byte ignored) of `level`. Blocks while both of the
    level's strips are busy. One thread pushes. CJS_ERR_IO (or the failure) once the export failed. */
cjs_status cjs_export_push_row(cjs_export *e, uint32_t level, const void *row);
/**
 * Blocks until an encoded tile is ready: CJS_OK and *tile (release it with cjs_export_release_tile),
 * CJS_DONE once every tile of every level has been taken, CJS_ERR_STATE after destroy began, or
 * the failure's status (CJS_ERR_IO after cjs_export_fail, CJS_ERR_NOMEM, CJS_ERR_LIBJPEG).
 */
cjs_status cjs_export_next_tile(cjs_export *e, cjs_export_tile *tile);
void cjs_export_release_tile(cjs_export_tile *tile);
/** Fails the export (a tile could not be stored): pushes, encoders and waits stop. Thread-safe. */
void cjs_export_fail(cjs_export *e, int32_t error_number);
/** The errno given to cjs_export_fail, else 0 (ENOMEM for an allocation). Thread-safe. */
int32_t cjs_export_errno(cjs_export *e);
/** Tiles taken so far. Thread-safe. */
uint64_t cjs_export_tiles_taken(cjs_export *e);

/** Encodes rows as a PNG (from 4-byte RGBA rows: RGB when every pixel is opaque, else RGBA; with `gray`
    1, 1-byte gray rows; with `gray` 2, 2-byte gray and alpha rows) into a buffer the caller frees with cjs_free; an ICC profile (`icc_length` bytes at `icc`,
    none when 0) as its iCCP chunk, unless libpng finds it does not fit the colour type. `cancelled` (may be
    NULL) is asked every 64 rows with `context`: nonzero stops the encode, CJS_ERR_CANCELLED, nothing out. */
cjs_status cjs_png_encode(const void *rows, size_t stride, uint32_t width, uint32_t height, int32_t gray,
                          const void *icc, size_t icc_length, void **out, size_t *length,
                          int32_t (*cancelled)(void *), void *context);
#ifdef __cplusplus
}
#endif
#endif
