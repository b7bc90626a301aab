/*
 * cjpeg_shim.h: the only header Swift sees of the C side of TiledImageKit.
 *
 * Thin, hand-written C over libjpeg-turbo's libjpeg API (Debian's libjpeg62-turbo):
 *  - cjs_decoder: a push decoder over a suspending source manager (bytes in, RGBX rows out),
 *  - cjs_pyramid: levels, the 2x2 shrink chain and the worker thread, over one level writer per level
 *    (the band writer, or the two-tile-row window writer),
 *  - cjs_encoder: an in-memory encoder used by tests, the demo and resized copies.
 * The reference decodes the tests compare with live in the CJpegReference target, not here.
 *
 * Conventions: every function returns a cjs_status, results come back through out-parameters,
 * byte buffers cross as void pointers plus a size_t length. Every function that calls libjpeg
 * arms its own setjmp first, so a libjpeg error never longjmps across a caller's frame. After an
 * error a handle is poisoned: every call but destroy returns CJS_ERR_STATE. No globals, no
 * printing. A handle is not thread-safe: one thread at a time (its Swift owner serializes).
 */
#ifndef CJPEG_SHIM_H
#define CJPEG_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CJS_OK = 0,
    /** The decoder needs more bytes before it can go on (libjpeg suspended). */
    CJS_NEED_DATA = 1,
    /** All scanlines have been read, or the decoder reached the end of the image. */
    CJS_DONE = 2,
    /** libjpeg reported an error; cjs_decoder_message() says which. */
    CJS_ERR_LIBJPEG = -1,
    /** The call does not fit the handle's state (or the handle failed before). */
    CJS_ERR_STATE = -2,
    CJS_ERR_NOMEM = -3,
    /** A system call failed; the errno is available from the handle. */
    CJS_ERR_IO = -4,
    CJS_ERR_ARGUMENT = -5,
} cjs_status;

/** What kind of failure a libjpeg error was, so Swift can map it to a stable error code. */
typedef enum {
    CJS_FAILURE_NONE = 0,
    CJS_FAILURE_CORRUPT = 1,
    CJS_FAILURE_UNSUPPORTED = 2,
    CJS_FAILURE_TOO_LARGE = 3,
    CJS_FAILURE_EMPTY = 4,
    CJS_FAILURE_TOO_MANY_WARNINGS = 5,
    CJS_FAILURE_NOMEM = 6,
    /** Scan data ended early (the stream ended, or a marker other than a restart marker came
        inside a scan) and the decoder was not told to accept truncation. */
    CJS_FAILURE_TRUNCATED = 7,
    /** The stream has more scans than cjs_decoder_options.max_scans. */
    CJS_FAILURE_TOO_MANY_SCANS = 8,
    /** A system call failed (writing or reading the coefficient file); cjs_decoder_errno() says which. */
    CJS_FAILURE_IO = 9,
    /** cjs_decoder_request_stop was called. */
    CJS_FAILURE_STOPPED = 10,
} cjs_failure_kind;

typedef enum {
    CJS_COLOR_UNKNOWN = 0,
    CJS_COLOR_GRAYSCALE = 1,
    CJS_COLOR_RGB = 2,
    CJS_COLOR_YCBCR = 3,
    CJS_COLOR_CMYK = 4,
    CJS_COLOR_YCCK = 5,
} cjs_color_space;

/* ------------------------------------------------------------------------------------------ */
/* Push decoder                                                                                */

typedef struct cjs_decoder cjs_decoder;

typedef struct {
    /** Warnings (corrupt data) allowed before the decode fails; 0 means no limit. */
    uint32_t warning_limit;
    /** Scans allowed (libjpeg-turbo's djpeg -maxscans); 0 means no limit. */
    uint32_t max_scans;
    /**
     * 1: scan data that ends early is a warning and libjpeg fills in the rest, as djpeg does.
     * 0: it fails the decode at the first sign (CJS_FAILURE_TRUNCATED), before anything more is decoded.
     */
    int32_t allow_truncated;
} cjs_decoder_options;

typedef struct {
    uint32_t width;
    uint32_t height;
    /** Components in the JPEG stream (1, 3 or 4). */
    int32_t components;
    /** A cjs_color_space value. */
    int32_t color_space;
    int32_t bits_per_sample;
    int32_t is_progressive;
    int32_t is_arithmetic;
} cjs_header;

/** Creates a decoder; `options` may be NULL. The caller owns *out and frees it with destroy. */
cjs_status cjs_decoder_create(const cjs_decoder_options *options, cjs_decoder **out);
void cjs_decoder_destroy(cjs_decoder *d);

/**
 * Appends `length` bytes. The bytes are copied; `bytes` need only live for the call.
 * Bytes libjpeg has consumed are dropped first (the buffer is compacted on every feed), so the
 * decoder holds only what it has not used yet; the buffer grows geometrically, so feeding is linear
 * in the input's size. Once the end-of-image marker has been read (cjs_decoder_finish returned
 * CJS_DONE), bytes are counted (cjs_decoder_bytes_after_end) and dropped.
 */
cjs_status cjs_decoder_feed(cjs_decoder *d, const void *bytes, size_t length);
/** Says that no more bytes will come: a stream that ends before its image does is truncated. */
cjs_status cjs_decoder_end_input(cjs_decoder *d);

/**
 * Asks libjpeg for DCT-domain scaling by 1/denominator (1, 2, 4 or 8): most coefficients are never
 * inverse-transformed. Call after the header, before start. *out_width, *out_height get the output
 * size (jpeg_calc_output_dimensions).
 */
cjs_status cjs_decoder_set_scale(cjs_decoder *d, uint32_t denominator, uint32_t *out_width, uint32_t *out_height);

/** Reads the header (jpeg_read_header). CJS_NEED_DATA until enough bytes are in; then CJS_OK. */
cjs_status cjs_decoder_read_header(cjs_decoder *d, cjs_header *out);
/**
 * Starts decompression to 4-byte pixels (jpeg_start_decompress). CJS_NEED_DATA when libjpeg
 * suspends (a progressive image is read whole here); call again after feeding more bytes.
 */
cjs_status cjs_decoder_start(cjs_decoder *d);
/**
 * Reads up to `max_rows` scanlines (jpeg_read_scanlines) as RGBA (alpha 255) into `dst`, rows
 * `stride` bytes apart (stride >= width * 4). *out_rows says how many were written. Returns
 * CJS_OK when max_rows were read, CJS_NEED_DATA when libjpeg suspended, CJS_DONE when the last
 * scanline has been read. CMYK and YCCK images are converted to RGB here.
 */
cjs_status cjs_decoder_read_rows(cjs_decoder *d, void *dst, size_t stride, uint32_t max_rows,
                                 uint32_t *out_rows);
/** Reads to the end of the stream (jpeg_finish_decompress): CJS_NEED_DATA or CJS_DONE. */
cjs_status cjs_decoder_finish(cjs_decoder *d);

/** Scanlines read so far. */
uint32_t cjs_decoder_rows_read(const cjs_decoder *d);
/** Compressed bytes held and not yet consumed by libjpeg. */
size_t cjs_decoder_bytes_buffered(const cjs_decoder *d);
/** Corrupt-data warnings seen so far (including the premature end of the stream). */
uint32_t cjs_decoder_warning_count(const cjs_decoder *d);
/** Bytes fed after the end of the image, counted and dropped. */
uint64_t cjs_decoder_bytes_after_end(const cjs_decoder *d);
/** 1 when scan data ended early and libjpeg filled in the rest (only with allow_truncated). */
int32_t cjs_decoder_is_truncated(const cjs_decoder *d);
/** The last error or warning message; owned by the decoder, valid until the next call. */
const char *cjs_decoder_message(const cjs_decoder *d);
/** The libjpeg message code of the last error (or 0). */
int32_t cjs_decoder_message_code(const cjs_decoder *d);
/** A cjs_failure_kind for the last error. */
int32_t cjs_decoder_failure_kind(const cjs_decoder *d);
/** The errno of a CJS_FAILURE_IO failure, else 0. */
int32_t cjs_decoder_errno(const cjs_decoder *d);
/**
 * Asks the decoder to stop: the decode in progress (on another thread) fails as CJS_FAILURE_STOPPED
 * at its next iMCU row of input, before its next scan, or at the next call. The one call that may
 * be made from any thread.
 */
void cjs_decoder_request_stop(cjs_decoder *d);

/**
 * Bytes of the whole-image coefficient arrays this image needs (128 per 8x8 block, as libjpeg sizes
 * them), or 0 when it has a single scan and libjpeg decodes it row by row without them. A progressive
 * or multi-scan JPEG is read whole into these arrays before its first row comes out. Call after the
 * header has been read.
 */
uint64_t cjs_decoder_coefficient_bytes(const cjs_decoder *d);
/**
 * Keeps the coefficient arrays in the file `fd` (opened read-write, empty, for example created
 * exclusively and unlinked) instead of memory, with a window of block rows per component in memory:
 * about `window_bytes` each (0: 1 MiB), never fewer than twice the rows libjpeg reads at once. Takes ownership of `fd` in every case: the decoder closes it once the image is decoded,
 * when it fails, or on destroy. Call after the header, before cjs_decoder_start. A full disk fails
 * the decode as CJS_FAILURE_IO with the errno.
 */
cjs_status cjs_decoder_use_coefficient_file(cjs_decoder *d, int fd, size_t window_bytes);
/** Bytes the coefficient file holds now (0 once closed, or when there is none). */
uint64_t cjs_decoder_coefficient_file_bytes(const cjs_decoder *d);

/* ------------------------------------------------------------------------------------------ */
/* Pyramid: levels, the 2x2 shrink chain, threads and progress, over one level writer per level  */

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
/** Loads a progress entry (acquire order). */
uint32_t cjs_load_progress(const uint32_t *entry);
/** Stores a progress entry (release order): for counters the caller keeps itself (previews). */
void cjs_store_progress(uint32_t *entry, uint32_t value);
/** The errno of the first failed write (valid after CJS_ERR_IO). Thread-safe. */
int32_t cjs_pyramid_errno(cjs_pyramid *p);

/* ------------------------------------------------------------------------------------------ */
/* Export: encoded tiles (DeepZoom's tiles: a tile size, an overlap) straight from a level's rows  */

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

/** Encodes rows as a PNG (RGB from 4-byte RGBA rows, the 4th dropped; or 1-byte gray rows) into a
    buffer the caller frees with cjs_free. */
cjs_status cjs_png_encode(const void *rows, size_t stride, uint32_t width, uint32_t height, int32_t gray,
                          void **out, size_t *length);
void cjs_free(void *pointer);

/* ------------------------------------------------------------------------------------------ */
/* Encoder (in memory)                                                                          */

typedef struct cjs_encoder cjs_encoder;

typedef struct {
    uint32_t width;
    uint32_t height;
    /** 1 (grayscale rows, 1 byte a pixel) or 3 (RGBA rows, 4 bytes a pixel, alpha ignored). */
    int32_t components;
    /** 1...100. */
    int32_t quality;
    /** Luma sampling factors: 1x1 is 4:4:4, 2x1 is 4:2:2, 2x2 is 4:2:0. */
    int32_t h_sampling;
    int32_t v_sampling;
    int32_t progressive;
    /** Restart interval in MCU rows (0: none). */
    int32_t restart_rows;
    int32_t optimize_coding;
} cjs_encoder_options;

cjs_status cjs_encoder_create(const cjs_encoder_options *options, cjs_encoder **out);
void cjs_encoder_destroy(cjs_encoder *e);
/** Writes a marker (e.g. 0xE1 for EXIF) after SOI; call before the first row. */
cjs_status cjs_encoder_write_marker(cjs_encoder *e, int32_t marker, const void *data, size_t length);
/** Writes an ICC profile as APP2 chunks; call before the first row. */
cjs_status cjs_encoder_write_icc(cjs_encoder *e, const void *data, size_t length);
cjs_status cjs_encoder_write_rows(cjs_encoder *e, const void *rows, size_t stride, uint32_t count);
/** Finishes the stream. *out points into the encoder's memory, valid until destroy. */
cjs_status cjs_encoder_finish(cjs_encoder *e, const void **out, size_t *length);
const char *cjs_encoder_message(const cjs_encoder *e);

/* ---- Tile encoder: one small image after another, one compressor reused -------------------- */

/** A JPEG compressor (4:2:0, RGBX rows, 4 bytes a pixel) whose settings are made once and reused from
    image to image: for encoding tiles one after another on one thread. Not thread-safe. */
typedef struct cjs_tile_encoder cjs_tile_encoder;

/** Creates an encoder at `quality` (1...100): YCbCr 4:2:0, or with `gray` non-zero one component
    (the rows' luma). */
cjs_status cjs_tile_encoder_create(int32_t quality, int32_t gray, cjs_tile_encoder **out);
void cjs_tile_encoder_destroy(cjs_tile_encoder *e);
/** Encodes `height` rows of `width` RGBX pixels, `stride` bytes apart. `*out` points into the
    encoder's memory, valid until the next encode or destroy. Calls `jpeg_start_compress`,
    `jpeg_write_scanlines` and `jpeg_finish_compress` under one setjmp guard. */
cjs_status cjs_tile_encoder_encode(cjs_tile_encoder *e, const void *rows, size_t stride, uint32_t width, uint32_t height,
                                   const void **out, size_t *length);


#ifdef __cplusplus
}
#endif
#endif
