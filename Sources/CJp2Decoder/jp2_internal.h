/* jp2_internal.h: what the JPEG 2000 decoder's files share (not seen by Swift). */
#ifndef CJP2_INTERNAL_H
#define CJP2_INTERNAL_H

#include <openjpeg.h>

#include "cjp2_decoder.h"

/* Where the data is: a file read with pread, or bytes in memory; neither owned. */
typedef struct {
    int fd;
    const uint8_t *bytes;
    uint64_t length;
} jp2_source;

/* A read position over a source: an OpenJPEG stream's user data. */
typedef struct {
    const jp2_source *source;
    uint64_t position;
    int short_read; /* OpenJPEG asked for bytes past the end of the data */
    int io_error;   /* a read failed: its errno */
} jp2_cursor;

/* OpenJPEG's 32-bit samples a band may hold at most (its window is cut to fit). */
#define JP2_BAND_BUDGET ((uint64_t)48 << 20)

struct cjp2_decoder {
    jp2_source source;
    jp2_cursor cursor;
    uint32_t threads;
    uint64_t band_budget;      /* bytes of OpenJPEG's samples a band may hold */
    cjp2_header header;
    uint32_t x0, y0;          /* the image's offset on the reference grid */
    uint32_t tile_x0, tile_dx; /* the tile grid's columns on the reference grid */
    uint32_t tile_y0, tile_dy; /* and rows */
    int precision[4];
    int is_signed[4];
    uint8_t *icc;
    size_t icc_length;
    uint8_t *band;             /* RGBA rows [band_top, band_top + band_rows) */
    size_t band_capacity;
    uint32_t band_top, band_rows;
    uint64_t band_bytes;
    uint32_t rows_read;
    cmaster_status failure;
    char message[256];
    char opj_message[256];     /* OpenJPEG's first error */
    char assertion[200];       /* the OpenJPEG assertion that failed (jp2_guard.c) */
    int complete;              /* the data is the whole file */
    int header_only;           /* opened from the markers only: no rows */
};

/* Records the first failure (status and message) and returns `status`. */
cmaster_status jp2_fail(cjp2_decoder *d, cmaster_status status, const char *format, ...);

/* A codec over a fresh stream of the decoder's data, its header read (the caller closes all three). */
cmaster_status jp2_open_codec(cjp2_decoder *d, opj_codec_t **codec, opj_stream_t **stream, opj_image_t **image);
void jp2_close_codec(opj_codec_t *codec, opj_stream_t *stream, opj_image_t *image);

/* Why OpenJPEG failed: CMASTER_ERR_IO (a read failed), CMASTER_ERR_TRUNCATED (it wanted bytes past the end,
   or found a tile-part longer than the data), else CMASTER_ERR_CORRUPT. */
cmaster_status jp2_failure(const cjp2_decoder *d);

/* CMASTER_OK for a guarded call's 1; jp2_failure for its 0; CMASTER_ERR_CORRUPT for a failed OpenJPEG
   assertion (-1), which becomes OpenJPEG's message. */
cmaster_status jp2_guarded_call(cjp2_decoder *d, int result);

/* A new OpenJPEG stream over `cursor` (its position reset), or NULL when out of memory. */
opj_stream_t *jp2_stream_create(jp2_cursor *cursor);

/* What a JP2's jp2h box says of colour, read from the boxes (OpenJPEG 2.5.0 gives the colour space and
   the ICC profile only after a decode). */
typedef struct {
    int method;        /* the first colr box's METH: 1 enumerated, 2 an ICC profile; 0 when none */
    uint32_t enumerated; /* EnumCS with method 1: 16 sRGB, 17 gray, 18 sYCC, 24 e-sYCC, 12 CMYK */
    uint8_t *icc;      /* malloc'd; the caller frees it */
    size_t icc_length;
    int has_palette;   /* a pclr box: components are palette indices */
    int has_channel_definitions; /* a cdef box */
} jp2_colour;

/* Fills *colour from the JP2's boxes (all zero for a bare codestream). 0 when out of memory. */
int jp2_read_colour(const jp2_source *source, jp2_colour *colour);

/* Checks the codestream's SIZ and COD markers before OpenJPEG allocates by them: 1 to 4 components
   (-1 when not: unsupported), no more tiles than the bytes can hold, and no more packets a tile
   (layers x resolutions x components, by any COD) than bytes, and no more code-blocks a tile (by any
   COD or COC, their code-block and precinct sizes) than JP2_FREE_CODE_BLOCKS and one a byte (when not: 0, corrupt, for `complete`
   data; 2, more bytes needed, for a beginning). 2 too when the data ends before the SIZ marker; 1
   when it passes. */
int jp2_check_size(const jp2_source *source, int complete, char *message, size_t capacity);

/* Code-blocks a tile may have whatever its bytes (jp2_check_size): past them, one a byte. */
#define JP2_FREE_CODE_BLOCKS (1u << 19)

/* The main header's SIZ and COD, read without OpenJPEG. */
typedef struct {
    uint32_t x0, y0, x1, y1;
    uint32_t tile_x0, tile_y0, tile_width, tile_height;
    uint32_t components;
    int precision[4];
    int is_signed[4];
    int resolutions;
} jp2_markers;

/* Reads the codestream's SIZ and COD markers (from a JP2's jp2c box): 1, or 2 when the bytes end before
   them, 0 when they are not valid (corrupt), -1 for what is not read (message in `message`). */
int jp2_read_markers(const jp2_source *source, jp2_markers *markers, char *message, size_t capacity);

/* The most bytes a band of HTJ2K takes: its RGBA rows (a whole row of tiles) and one tile's 32-bit
   samples. OpenJPEG (2.5.0, and its master in 2026) fills an HT code-block only when the whole tile is
   decoded: for a window inside a tile, opj_t1_ht_decode_cblk writes t1->data while the sub-tile path
   reads cblk->decoded_data, left zero (mid-gray). A 24 MP RGB image of one tile takes 384 MiB. */
#ifndef JP2_HT_BAND_CAP
#define JP2_HT_BAND_CAP ((uint64_t)512 << 20)
#endif

/* CMASTER_OK, or the decoder failed as CMASTER_ERR_UNSUPPORTED when it is HTJ2K and a band of it (a
   row of whole tiles) would pass JP2_HT_BAND_CAP: checked before rows are read and when only a file's
   beginning is (an upload's), not when the header alone is asked for. */
cmaster_status jp2_check_high_throughput(cjp2_decoder *d);

/* Whether the codestream is HTJ2K (ISO/IEC 15444-15): its CAP marker says its code-blocks may be coded
   with the high-throughput block coder, or its main header's COD or COC says they are. 0 too when its
   main header is not (yet) there. */
int jp2_is_high_throughput(const jp2_source *source);

/* opj_read_header and opj_decode with OpenJPEG's assertions on this thread caught (jp2_guard.c): 1 when
   the call succeeded, 0 when it failed, -1 when one of its assertions failed (which one in `message`;
   the codec is then fit only for destroying). */
int jp2_guarded_read_header(opj_stream_t *stream, opj_codec_t *codec, opj_image_t **image, char *message, size_t capacity);
int jp2_guarded_decode(opj_codec_t *codec, opj_stream_t *stream, opj_image_t *image, char *message, size_t capacity);

/* Reading a source in jp2_stream.c, shared with jp2_markers.c. `count` bytes at `offset` of the source
   (0 when they are not all there); a big-endian 32-bit number; a box header at `offset` within
   [offset, end): its type, where its contents start and end (0 when it does not fit). */
int jp2_read_at(const jp2_source *s, uint64_t offset, void *out, size_t count);
uint32_t jp2_be32(const uint8_t *p);
int jp2_read_box(const jp2_source *s, uint64_t offset, uint64_t end, uint32_t *type, uint64_t *start, uint64_t *stop);
#define BOX(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

/* Whether the data is a JP2 file (1) or a bare codestream (0). */
int jp2_is_jp2(const uint8_t *head, size_t length);

#endif
