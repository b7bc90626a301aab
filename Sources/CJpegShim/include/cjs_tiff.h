/*
 * cjs_tiff.h: tiled pyramidal (Big)TIFFs through libtiff, in the layout libvips writes: full resolution
 * in the first directory, then each half-size level with NewSubfileType "reduced image"; tiles JPEG
 * (abbreviated streams, their tables once per level in JPEGTables), YCbCr with the source's sampling
 * or grayscale; or WebP (Compression 50001, as libtiff and libvips write it: each tile a whole WebP
 * file of the tile's full size), RGB or RGB with unassociated alpha.
 *  - cjs_tiff_writer: the container. Level 0's tiles go into the file as they come; lower levels'
 *    tiles, which come at the same time, wait in a spool file and are copied in by finish.
 *  - cjs_decoder_transcode_into: level 0 from a JPEG's own DCT coefficients, entropy-coded tile by
 *    tile (no IDCT, no DCT: lossless), while the decoder's rows make the lower levels.
 *  - cjs_tiff_level_encoder: a level's rows into JPEG tiles (lower levels; level 0 of a JPEG whose
 *    coefficients cannot be copied).
 *  - cjs_tiff_reader, cjs_jpeg_tile_decode: reading ours and others' (JPEG, deflate, LZW, none).
 * libtiff's messages go to the handle (cjs_*_message), never to stderr; nothing keeps globals.
 */
#ifndef CJS_TIFF_H
#define CJS_TIFF_H

#include "cjs_common.h"
#include "cjs_decoder.h"

#ifdef __cplusplus
extern "C" {
#endif

/** TIFF's own numbers for the photometric interpretations the shim writes or reads. */
typedef enum {
    CJS_PHOTOMETRIC_GRAY = 1,  /* MinIsBlack */
    CJS_PHOTOMETRIC_RGB = 2,
    CJS_PHOTOMETRIC_YCBCR = 6,
} cjs_photometric;

/** One level of a TIFF being written: its size and its coding. */
typedef struct {
    uint32_t width;
    uint32_t height;
    /** JPEG: CJS_PHOTOMETRIC_YCBCR (3 samples) or CJS_PHOTOMETRIC_GRAY (1 sample). WebP: CJS_PHOTOMETRIC_RGB. */
    int32_t photometric;
    /** YCbCrSubsampling: luma samples per chroma sample across and down (1, 2 or 4; down <= across). */
    uint16_t h_subsampling;
    uint16_t v_subsampling;
    /** JPEGTables: SOI, DQT, DHT, EOI. Copied by create; need only live for the call. NULL for WebP. */
    const void *jpeg_tables;
    size_t jpeg_tables_length;
    /** 0 or CJS_COMPRESSION_JPEG: JPEG tiles; CJS_COMPRESSION_WEBP: WebP tiles. */
    int32_t compression;
    /** WebP: 3 (RGB) or 4 (RGB and unassociated alpha, ExtraSamples 2). */
    int32_t samples;
    /** WebP: the encoder's quality (1...100; lossless: the effort on size), lossless when non-zero. */
    int32_t webp_quality;
    int32_t webp_lossless;
} cjs_tiff_level;

typedef struct {
    /** Tile side, a multiple of 16. */
    uint32_t tile_size;
    /** 1: BigTIFF (64-bit offsets); 0: classic TIFF, whose file must stay under 4 GiB. */
    int32_t big_tiff;
    /** An ICC profile for InterColorProfile (copied), or NULL. */
    const void *icc_profile;
    size_t icc_profile_length;
    /** ResolutionUnit (2: inch, 3: centimetre) and the resolutions; unit 0 writes none. */
    int32_t resolution_unit;
    double x_resolution;
    double y_resolution;
} cjs_tiff_options;

typedef struct cjs_tiff_writer cjs_tiff_writer;

/**
 * Creates a writer of `count` levels (level 0 first, each the 2x2 shrink of the one before) into `fd`
 * (empty, read-write), lower levels' tiles waiting in `spool_fd` (empty, read-write) until finish.
 * Neither descriptor is closed or kept past destroy; both must stay open until then. `progress`, if
 * not NULL, has `count` entries and must outlive the writer: each level's count of complete tile
 * rows is stored there (release order) once every tile of the row is in a file. Memory: the tile
 * tables (16 bytes a tile). CJS_ERR_IO (libtiff refused the file: cjs_tiff_writer_copy_message after a
 * successful create is unavailable, so the status alone says it), CJS_ERR_ARGUMENT, CJS_ERR_NOMEM.
 */
cjs_status cjs_tiff_writer_create(int32_t fd, int32_t spool_fd, const cjs_tiff_options *options,
                                  const cjs_tiff_level *levels, uint32_t count, uint32_t *progress,
                                  cjs_tiff_writer **out);
/** Frees the writer and libtiff's handle (without writing what is missing); closes no descriptor. */
void cjs_tiff_writer_destroy(cjs_tiff_writer *w);
/**
 * Stores one encoded tile (an abbreviated JPEG stream: SOI, SOF, SOS, data, EOI): level 0's through
 * TIFFWriteRawTile, others' into the spool. `bytes` need only live for the call. Thread-safe.
 * CJS_ERR_IO (cjs_tiff_writer_errno, cjs_tiff_writer_copy_message), CJS_ERR_ARGUMENT, CJS_ERR_STATE after
 * a failure or finish.
 */
cjs_status cjs_tiff_writer_put_tile(cjs_tiff_writer *w, uint32_t level, uint32_t column, uint32_t row,
                                    const void *bytes, size_t length);
/**
 * Where a tile written so far is: *in_spool (1: the spool's descriptor, 0: the TIFF's), *offset and
 * *length. CJS_NEED_DATA when it is not written yet; CJS_ERR_ARGUMENT outside the grid. Thread-safe.
 */
cjs_status cjs_tiff_writer_locate(cjs_tiff_writer *w, uint32_t level, uint32_t column, uint32_t row,
                                  int32_t *in_spool, uint64_t *offset, uint64_t *length);
/**
 * Once every tile is in: writes level 0's directory, copies each lower level's tiles from the spool
 * (TIFFWriteRawTile) and writes its directory, then flushes libtiff. Tiles stay readable throughout
 * (cjs_tiff_writer_locate moves each to the TIFF once it is there). CJS_ERR_STATE when tiles are
 * missing, CJS_ERR_IO.
 */
cjs_status cjs_tiff_writer_finish(cjs_tiff_writer *w);
/** Bytes of tiles written so far (TIFF and spool). Thread-safe. */
uint64_t cjs_tiff_writer_bytes_written(cjs_tiff_writer *w);
/** The errno of the first failure (0 when none, or when libtiff failed without one). Thread-safe. */
int32_t cjs_tiff_writer_errno(cjs_tiff_writer *w);
/** Copies the first failure's message (libtiff's, or the shim's; empty when none) into `out`, cut to
    `capacity` bytes with its NUL. Thread-safe (copied under the writer's lock). */
void cjs_tiff_writer_copy_message(cjs_tiff_writer *w, char *out, size_t capacity);

/** The quantisation tables an encoded level is scaled from. */
typedef enum {
    /** Annex K's tables as libjpeg's jpeg_set_quality scales them: what `quality` means to every encoder. */
    CJS_TABLES_ANNEX_K = 0,
    /** Annex K's tables with the spread of each halved on a log scale: an entry K over the table's
        first (DC) entry D becomes D * sqrt(K / D); entries at or under D are kept. Never coarser than
        Annex K's at the same quality; finer at the high frequencies, which a box filter's reference
        (PSNR) counts as much as the low ones. Then scaled by quality as libjpeg scales Annex K's. */
    CJS_TABLES_FLATTENED = 1,
} cjs_quant_tables;

/**
 * JPEGTables for tiles cjs_tiff_level_encoder encodes at `quality` (1...100) from `tables` (a
 * cjs_quant_tables) with libjpeg's standard Huffman tables, as SOI, DQT, DHT, EOI, in a buffer the
 * caller frees with cjs_free. `gray`: one component. Calls jpeg_write_tables.
 */
cjs_status cjs_jpeg_tables(int32_t quality, int32_t tables, int32_t gray, void **out, size_t *length);

typedef struct cjs_tiff_level_encoder cjs_tiff_level_encoder;

/**
 * Decodes one WebP tile of a TIFF (a whole WebP file) into RGBA, `stride` bytes a row; alpha 255 where
 * the tile has none. The tile must be `width` x `height`. Thread-safe. CJS_ERR_LIBJPEG (the shim's
 * "codec refused" status) for data that is not such a WebP, with a message in `message`.
 */
cjs_status cjs_webp_tile_decode(const void *tile, size_t tile_length, uint32_t width, uint32_t height, void *rgba,
                                size_t stride, char *message, size_t capacity);

/**
 * An encoder of level `level`'s rows into its JPEG tiles in `writer`, at `quality` from `tables` (what
 * the level's JPEGTables were made for: cjs_jpeg_tables). One libjpeg compressor per tile column, fed
 * each row as it comes, so memory is the compressors' (about 50 KiB each) and the tiles' bytes, never
 * a tile row of pixels. Edge tiles are padded by repeating the last column and row. `writer` must
 * outlive the encoder. For a level of WebP tiles (`quality` and `tables` then unused): a tile row of
 * RGBA is held (tile size x the level's padded width), each tile encoded by libwebp (method 4) once
 * its last row is in; alpha kept losslessly when the level has 4 samples.
 */
cjs_status cjs_tiff_level_encoder_create(cjs_tiff_writer *writer, uint32_t level, int32_t quality,
                                         int32_t tables, cjs_tiff_level_encoder **out);
void cjs_tiff_level_encoder_destroy(cjs_tiff_level_encoder *e);
/** The level's next row: width * 4 bytes of RGBA (alpha ignored). CJS_ERR_LIBJPEG, CJS_ERR_IO (the
    writer's), CJS_ERR_NOMEM, CJS_ERR_ARGUMENT past the last row. Calls jpeg_write_scanlines and, at
    the end of each tile row, jpeg_finish_compress, under one setjmp. */
cjs_status cjs_tiff_level_encoder_push_row(cjs_tiff_level_encoder *e, const void *row);

/**
 * Level 0's coding when it is copied from this decoder's JPEG (after the header, before start):
 * fills `level` (size, photometric, subsampling; jpeg_tables points into the decoder, valid until
 * destroy) for tiles of `tile_size` of the image turned upright by EXIF `orientation` (1: as stored;
 * 2-8: turned in the DCT domain, as jpegtran turns it). CJS_ERR_ARGUMENT when the coefficients cannot
 * make TIFF JPEG tiles (CMYK, RGB-coded, 12-bit, sampling TIFF cannot say, an MCU that does not divide
 * the tile; turned: a flipped side that is not a whole number of MCUs, 4:2:2 transposed);
 * cjs_decoder_message then says why.
 */
cjs_status cjs_decoder_transcode_plan(cjs_decoder *d, uint32_t tile_size, int32_t orientation, cjs_tiff_level *level);
/**
 * Makes level 0 of `writer` from this JPEG's coefficients while the decoder's rows come out as before
 * (after cjs_decoder_transcode_plan, before start): the image is decoded in buffered-image mode and
 * each iMCU row's coefficients, once final, are entropy-coded into its tiles by a thread of the
 * transcoder's own (a turned plan's, a tile's rows at a time: the upright tiles they hold). A single-scan image's coefficients are never whole (a ring of iMCU rows); a
 * multi-scan image's stay where cjs_decoder_use_coefficient_file put them. `writer` must outlive the
 * decoder.
 */
cjs_status cjs_decoder_transcode_into(cjs_decoder *d, cjs_tiff_writer *writer);
/** Waits until the coefficient rows the output pass has moved past are coded (a turned plan's: the
    whole bands of a tile's rows among them) and their complete
    tile rows written (for callers that need the tiles of the rows decoded so far now). */
cjs_status cjs_decoder_transcode_sync(cjs_decoder *d);
/** After cjs_decoder_finish: waits until every level-0 tile is in the writer. CJS_OK, or the
    failure's status (CJS_ERR_IO: cjs_decoder_errno). */
cjs_status cjs_decoder_transcode_wait(cjs_decoder *d);

/* ---- Reading ------------------------------------------------------------------------------- */

/** TIFF compressions the reader decodes. */
typedef enum {
    CJS_COMPRESSION_NONE = 1,
    CJS_COMPRESSION_LZW = 5,
    CJS_COMPRESSION_JPEG = 7,
    CJS_COMPRESSION_DEFLATE = 8,
    CJS_COMPRESSION_ADOBE_DEFLATE = 32946,
    /** libtiff's COMPRESSION_WEBP: decoded from the tile's bytes by cjs_webp_tile_decode. */
    CJS_COMPRESSION_WEBP = 50001,
} cjs_compression;

/** One tiled directory of a TIFF (an IFD, or a SubIFD of the first). */
typedef struct {
    uint32_t width;
    uint32_t height;
    uint32_t tile_width;
    uint32_t tile_height;
    uint32_t columns;
    uint32_t rows;
    int32_t compression;
    int32_t photometric;
    int32_t samples_per_pixel;
    int32_t bits_per_sample;
    /** 1 when the last sample is (associated or unassociated) alpha. */
    int32_t has_alpha;
    /** 1: contiguous samples; 2: separate planes (not decoded). */
    int32_t planar;
    uint16_t h_subsampling;
    uint16_t v_subsampling;
    /** NewSubfileType bit 0. */
    int32_t is_reduced;
    /** 1 for a SubIFD of the first directory. */
    int32_t is_subifd;
    /** JPEGTables, owned by the reader (NULL when absent). */
    const void *jpeg_tables;
    size_t jpeg_tables_length;
} cjs_tiff_directory;

typedef struct cjs_tiff_reader cjs_tiff_reader;

/**
 * Reads every directory of the TIFF in `fd` (and the first one's SubIFDs) through libtiff, keeping the
 * tiled ones: their sizes, codings and tile tables. `fd` is not owned; it must stay open until
 * destroy (reads use pread, so other threads may read it too). Memory: 16 bytes a tile, capped.
 * CJS_ERR_LIBJPEG is never returned: CJS_ERR_ARGUMENT (not a TIFF, no tiled directory, sizes past
 * the limits) with the message in `message` (`capacity` bytes, may be NULL), CJS_ERR_NOMEM.
 */
cjs_status cjs_tiff_reader_open(int32_t fd, uint64_t max_tiles, cjs_tiff_reader **out, char *message,
                                size_t capacity);
/** Bytes of a file at `offset` (a part of a remote TIFF fetched so far). */
typedef struct {
    uint64_t offset;
    const void *bytes;
    size_t length;
} cjs_tiff_segment;
/**
 * cjs_tiff_reader_open for a TIFF of `size` bytes of which only `segments` are at hand (sorted by offset,
 * not overlapping, touching ones read as one; not kept after the call): a remote object read by ranges.
 * When libtiff reads bytes outside them, nothing is kept: CJS_ERR_IO with the first range it wanted in `missing_offset` and
 * `missing_length` (0 otherwise); fetch it and call again. A reader opened so has no descriptor: its
 * tiles are located (cjs_tiff_reader_locate), never read or decoded by it.
 */
cjs_status cjs_tiff_reader_open_segments(const cjs_tiff_segment *segments, size_t count, uint64_t size,
                                         uint64_t max_tiles, cjs_tiff_reader **out, uint64_t *missing_offset,
                                         uint64_t *missing_length, char *message, size_t capacity);
void cjs_tiff_reader_destroy(cjs_tiff_reader *r);
/** The first directory's ICC profile (InterColorProfile), owned by the reader; NULL and 0 when none. */
void cjs_tiff_reader_icc_profile(const cjs_tiff_reader *r, const void **data, size_t *length);
/** Tiled directories kept, in file order (SubIFDs after the first directory). */
uint32_t cjs_tiff_reader_directory_count(const cjs_tiff_reader *r);
/** Directory `index`'s description (valid until destroy). CJS_ERR_ARGUMENT out of range. */
cjs_status cjs_tiff_reader_directory(const cjs_tiff_reader *r, uint32_t index, cjs_tiff_directory *out);
/** A tile's bytes in the file. CJS_ERR_ARGUMENT outside the grid. Thread-safe. */
cjs_status cjs_tiff_reader_locate(const cjs_tiff_reader *r, uint32_t directory, uint32_t column, uint32_t row,
                                  uint64_t *offset, uint64_t *length);
/**
 * Decodes a tile that is not JPEG (none, LZW, deflate: libtiff's codecs, predictors included) into
 * RGBA, `stride` bytes a row, tile_width x tile_height: gray, gray + alpha, RGB, RGBA, 8 bits. Opens
 * the directory's own libtiff handle on first use; calls on one directory are serialized, other
 * directories' run at once. CJS_ERR_ARGUMENT for a coding it does not read, CJS_ERR_IO for a tile
 * libtiff cannot decode (message in `message`).
 */
cjs_status cjs_tiff_reader_decode(cjs_tiff_reader *r, uint32_t directory, uint32_t column, uint32_t row, void *rgba,
                                  size_t stride, char *message, size_t capacity);

/**
 * Decodes one JPEG tile of a TIFF into RGBA (alpha 255), `stride` bytes a row: `tables` (JPEGTables,
 * may be NULL) then `tile`, read as libjpeg reads abbreviated streams, the colour space taken from
 * `photometric` as libtiff does. The tile must be `width` x `height`. Thread-safe (a decompressor per
 * call). CJS_ERR_LIBJPEG for data that is not such a JPEG (corrupt, truncated, another size), with
 * libjpeg's message in `message`. Calls jpeg_read_header, jpeg_start_decompress, jpeg_read_scanlines.
 */
cjs_status cjs_jpeg_tile_decode(const void *tables, size_t tables_length, const void *tile, size_t tile_length,
                                int32_t photometric, uint32_t width, uint32_t height, void *rgba, size_t stride,
                                char *message, size_t capacity);

/**
 * Crops one JPEG tile of a TIFF to its top-left `width` x `height` pixels without decoding it: the
 * DCT coefficients are read (`tables`, may be NULL, then `tile`, as cjs_jpeg_tile_decode reads them)
 * and written again under a smaller frame: what jpegtran -crop WxH+0+0 writes, so the region decodes
 * as jpegtran's crop does (the last column or row of a subsampled tile's chroma may be upsampled
 * differently from the padded tile's). Coded in one pass with the tile's own Huffman tables when their
 * DC tables have a code for every category (the crop's DC differences change where its rows begin),
 * else with tables optimised for the crop (two passes). The tile's JPEG must be
 * `tile_width` x `tile_height` (checked before its coefficients are read). On success `*out` is a
 * complete JPEG the caller frees with cjs_free. Thread-safe (a decompressor and a compressor per
 * call). CJS_ERR_ARGUMENT for a region larger than the tile or a tile that is neither YCbCr nor gray;
 * CJS_ERR_LIBJPEG for data that is not such a tile (corrupt, truncated, another size; message in
 * `message`). Calls jpeg_read_header, jpeg_read_coefficients, jpeg_write_coefficients,
 * jpeg_finish_compress.
 */
cjs_status cjs_jpeg_tile_crop(const void *tables, size_t tables_length, const void *tile, size_t tile_length,
                              uint32_t tile_width, uint32_t tile_height, uint32_t width, uint32_t height, void **out,
                              size_t *out_length, char *message, size_t capacity);

#ifdef __cplusplus
}
#endif
#endif
