/*
 * cjpeg_shim.h: the only header Swift sees of the C side of TiledImageKit.
 *
 * Thin, hand-written C over libjpeg-turbo's libjpeg API (Debian's libjpeg62-turbo):
 *  - cjs_decoder: a push decoder over a suspending source manager (bytes in, RGBX rows out),
 *  - cjs_pyramid: the level writers (two-tile-row mmap window, or bands written with pwrite/AIO) and the 2x2 shrink,
 *  - cjs_encoder: an in-memory encoder used by tests, the demo and resized copies,
 *  - cjs_reference_*: plain whole-image decodes with libjpeg's ordinary API (tests and benchmarks).
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

/* ------------------------------------------------------------------------------------------ */
/* Pyramid writer: tiles, windows, shrink                                                      */

typedef struct cjs_pyramid cjs_pyramid;

/** One level of a pyramid, in stored (source) orientation. */
typedef struct {
    /** An open, writable file descriptor; the pyramid does not close it. */
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

typedef enum {
    /** A shared mapping of two tile rows of each level's file, rows scattered into it. */
    CJS_WRITER_MMAP = 0,
    /** Bands of 64 rows per level, each written as one block per tile when full (pwrite or AIO). */
    CJS_WRITER_PWRITE = 1,
} cjs_writer_kind;

/** Flags for cjs_pyramid_create. */
enum {
    /**
     * Scatter, shrink and write on a worker thread, so decoding overlaps tiling and writing.
     */
    CJS_PYRAMID_THREADED = 1,
    /** Write with O_DIRECT where the file system allows it (bypasses the page cache); the level
     *  files' space is then reserved up front (posix_fallocate). */
    CJS_PYRAMID_DIRECT_IO = 2,
    /**
     * With CJS_PYRAMID_THREADED: the worker submits each full band's writes asynchronously (Linux
     * AIO) and fills the next band while they run (three bands per level); a reaper thread takes
     * the completions. Without it, the worker writes each band itself before filling the next.
     */
    CJS_PYRAMID_WRITE_BEHIND = 4,
};

/**
 * Creates a pyramid writer over `count` levels (level 0 first; each is the 2x2 shrink of the one
 * before). `levels` is copied. Tiles are tile_size x tile_size x 4 bytes, contiguous; padding is
 * zero. The files are sized here (sparse: no disk is allocated before data arrives). `flags` are
 * CJS_PYRAMID_* values; threads and O_DIRECT apply to CJS_WRITER_PWRITE only. `progress`, if not
 * NULL, has `count` entries and must outlive the pyramid: the writer stores each level's count of
 * complete tile rows there atomically (release order), so readers on any thread can follow it with
 * cjs_load_progress. `band_rows` (pwrite writer): rows per band, a divisor of tile_size (0: 64, or
 * the tile size if 64 does not divide it); each level holds three bands (two when a band is a whole
 * tile row) and writes each tile's part of a band as one block.
 */
cjs_status cjs_pyramid_create(const cjs_level *levels, uint32_t count, uint32_t tile_size, uint32_t band_rows,
                              int32_t writer_kind, int32_t flags, uint32_t *progress, cjs_pyramid **out);
/** Stops the threads (unfinished work is dropped) and frees everything. */
void cjs_pyramid_destroy(cjs_pyramid *p);
/**
 * Lends the caller a buffer for up to *capacity level-0 rows, `*stride` bytes apart (blocks while
 * the worker has every buffer). The buffer is the pyramid's; it is valid until the next submit.
 */
cjs_status cjs_pyramid_acquire_rows(cjs_pyramid *p, void **rows, size_t *stride, uint32_t *capacity);
/** Hands back the buffer from acquire with `count` rows in it (0 is allowed) to be tiled. */
cjs_status cjs_pyramid_submit_rows(cjs_pyramid *p, uint32_t count);
/** Pushes `count` level-0 rows of RGBA pixels (width * 4 bytes each, `stride` bytes apart), copying. */
cjs_status cjs_pyramid_push_rows(cjs_pyramid *p, const void *rows, size_t stride, uint32_t count);
/** Waits until every submitted row is tiled and every completed strip written. */
cjs_status cjs_pyramid_sync(cjs_pyramid *p);
/** Completes every level (averages an odd last row with itself) and flushes what is left. */
cjs_status cjs_pyramid_finish(cjs_pyramid *p);
/** Tile rows of `level` written completely so far (thread-safe). */
uint32_t cjs_pyramid_tile_rows_complete(const cjs_pyramid *p, uint32_t level);
/** Loads a progress entry (acquire order). */
uint32_t cjs_load_progress(const uint32_t *entry);
/** The errno of the last CJS_ERR_IO. */
int32_t cjs_pyramid_errno(const cjs_pyramid *p);

/** The 2x2 box shrink of one pair of RGBA rows (`below` may equal `above`): the hot loop. */
void cjs_shrink_rows(const uint8_t *above, const uint8_t *below, uint32_t width, uint8_t *out);

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

/* ------------------------------------------------------------------------------------------ */
/* Reference decodes with libjpeg's ordinary (non-suspending) API                               */

typedef struct {
    uint32_t width;
    uint32_t height;
    uint32_t warnings;
    int32_t failed;
    char message[200];
} cjs_reference_result;

/**
 * Decodes a whole in-memory JPEG (jpeg_mem_src) to RGBA, alpha 255, default settings. CMYK and
 * YCCK are decoded as CMYK and turned into R = C*K/255 (rounded), as djpeg's PPM writer does.
 * *out is malloc'd (free it with cjs_free); NULL on failure (see result->message).
 */
cjs_status cjs_reference_decode(const void *data, size_t length, void **out,
                                cjs_reference_result *result);
/** Decodes a file (jpeg_stdio_src) to RGBA a strip at a time and discards it: the decode floor. */
cjs_status cjs_reference_decode_file_discard(const char *path, cjs_reference_result *result);
void cjs_free(void *pointer);

#ifdef __cplusplus
}
#endif
#endif
