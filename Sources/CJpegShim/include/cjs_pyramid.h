/*
 * cjs_pyramid.h: levels, the 2x2 shrink chain and the worker thread, over one level writer per level.
 */
#ifndef CJS_PYRAMID_H
#define CJS_PYRAMID_H

#include "cjs_common.h"

#ifdef __cplusplus
extern "C" {
#endif
struct cjs_export;
struct cjs_tiff_writer;


typedef struct cjs_pyramid cjs_pyramid;

/** One level of a pyramid, in stored (source) orientation. */
typedef struct {
    /** An open, writable file descriptor. The pyramid neither closes it nor keeps it past destroy:
        the caller closes it after cjs_pyramid_destroy has returned (the threads use it until then). */
    int32_t fd;
    /** The image's size at this level. */
    uint32_t width;
    uint32_t height;
    /** Where the image's top-left pixel sits in the padded tile grid (each < tile size). */
    uint32_t x_offset;
    uint32_t y_offset;
    /** The tile grid: the file holds columns * rows tiles, in row order. */
    uint32_t columns;
    uint32_t rows;
} cjs_level;

/** The level writer strategies. */
typedef enum {
    /** The band writer: rows are gathered in bands of band_rows rows per level; a full band is
        written as one block per tile (Linux AIO with write-behind, else pwrite). The default. */
    CJS_WRITER_BANDS = 1,
    /** The window writer: a shared mapping of two tile rows of each level's file; rows are
        scattered into it and the kernel writes the pages back. */
    CJS_WRITER_WINDOW = 2,
    /** No level files: the rows go only to the export (cjs_writer_config.export), on a worker
        thread. The levels' fd, offsets and grids are not used. */
    CJS_WRITER_NONE = 3,
    /** JPEG tiles of a TIFF (cjs_writer_config.tiff), from level first_level down, encoded on a
        worker thread by one cjs_tiff_level_encoder per level. The levels' fd are not used; their
        progress entries are the TIFF writer's to update. */
    CJS_WRITER_TIFF = 4,
} cjs_writer_kind;

/** How the band writer runs (cjs_writer_config.band_threading). */
typedef enum {
    /** Tiles and writes on the caller's thread, in submit. */
    CJS_BANDS_ON_CALLER = 0,
    /** A worker thread tiles and writes while the caller decodes; each full band is written before
        the next is filled (one band per level). */
    CJS_BANDS_ON_WORKER = 1,
    /** As CJS_BANDS_ON_WORKER, and a full band's writes are submitted asynchronously (Linux AIO)
        while the next band fills (three bands per level, two when a band is a whole tile row); a
        reaper thread takes the completions. Falls back to CJS_BANDS_ON_WORKER where AIO is refused. */
    CJS_BANDS_WRITE_BEHIND = 2,
} cjs_band_threading;

/** The writer strategy and its parameters. */
typedef struct {
    /** A cjs_writer_kind. */
    int32_t kind;
    /** Band writer: rows per band, a divisor of the tile size (0: 64, or the tile size where 64
        does not divide it). */
    uint32_t band_rows;
    /** Band writer: a cjs_band_threading. */
    int32_t band_threading;
    /** Band writer: 1 to write with O_DIRECT where blocks and offsets are 4096-aligned. */
    int32_t bypass_page_cache;
    /** If not NULL, every level's rows also go to this export (its levels must be the pyramid's
        sizes), after the level's writer has them. It must outlive the pyramid. */
    struct cjs_export *export_to;
    /** TIFF writer: where the tiles go (it must outlive the pyramid), their JPEG quality and
        cjs_quant_tables (what the levels' JPEGTables were made for). */
    struct cjs_tiff_writer *tiff;
    int32_t tiff_quality;
    int32_t tiff_tables;
    /** TIFF writer: the EXIF orientation (2-8) its levels are turned upright by, 0 or 1 for none: the
        levels' rows come as stored, a band of a tile's height is held, and the upright tiles it
        holds are encoded once its last row comes (turned_tiles.c); the TIFF's levels are upright. */
    int32_t tiff_orientation;
    /** The first level written, of any kind (1 when level 0 is made elsewhere: a TIFF's transcoded
        from the source's coefficients): the rows of the levels above it only feed the shrink, and
        their files are not sized. */
    uint32_t first_level;
} cjs_writer_config;

/**
 * Creates a pyramid over `count` levels (level 0 first; each is the 2x2 shrink of the one before)
 * with one writer of `writer`'s kind per level. `levels` and `writer` are copied. Tiles are
 * tile_size x tile_size x 4 bytes, contiguous; padding is zero. The files are sized here (sparse:
 * no disk is allocated before data arrives). `progress`, if not NULL, has `count` entries and must
 * outlive the pyramid: each level's count of complete tile rows is stored there atomically
 * (release order), so readers on any thread can follow it with cjs_load_progress.
 * Returns CJS_OK; CJS_ERR_ARGUMENT for a bad geometry or configuration; CJS_ERR_NOMEM; CJS_ERR_IO
 * with *out_error_number set to the errno (ftruncate's EFBIG under a file-size limit, ...).
 * *out_error_number is 0 otherwise. On failure *out is NULL and nothing is left allocated.
 */
cjs_status cjs_pyramid_create(const cjs_level *levels, uint32_t count, uint32_t tile_size,
                              const cjs_writer_config *writer, uint32_t *progress, cjs_pyramid **out,
                              int32_t *out_error_number);
/** Stops and joins the threads (unfinished work is dropped, writes in flight are waited for) and
    frees everything. The level files' descriptors may be closed once it has returned. */
void cjs_pyramid_destroy(cjs_pyramid *p);
/**
 * Lends the caller a buffer for up to *capacity level-0 rows, `*stride` bytes apart (blocks while
 * the worker has every buffer). The buffer is the pyramid's; it is valid until the next submit.
 * CJS_ERR_IO once a write has failed (cjs_pyramid_errno says why).
 */
cjs_status cjs_pyramid_acquire_rows(cjs_pyramid *p, void **rows, size_t *stride, uint32_t *capacity);
/** Hands back the buffer from acquire with `count` rows in it (0 is allowed) to be tiled.
    CJS_ERR_ARGUMENT for more rows than lent; CJS_ERR_IO once a write has failed. */
cjs_status cjs_pyramid_submit_rows(cjs_pyramid *p, uint32_t count);
/** Waits until every submitted row is tiled and every complete band written. CJS_OK or CJS_ERR_IO. */
cjs_status cjs_pyramid_sync(cjs_pyramid *p);
/** Waits as sync does, then checks that every level has all its rows: CJS_OK, CJS_ERR_IO, or
    CJS_ERR_STATE when rows are missing. */
cjs_status cjs_pyramid_finish(cjs_pyramid *p);
/** The errno of the first failed write (valid after CJS_ERR_IO). Thread-safe. */
int32_t cjs_pyramid_errno(cjs_pyramid *p);
#ifdef __cplusplus
}
#endif
#endif
