/* cjp2_decoder.h: a decoder of JPEG 2000 masters (JP2 files and bare J2K codestreams) over OpenJPEG,
 * giving RGBA rows of 8-bit samples a band at a time: the only header Swift sees of the JPEG 2000 side
 * (openjpeg.h stays in the .c files).
 *
 * The decoder reads a file it does not own (the master's own, or a spool of its bytes) or bytes in
 * memory it does not own, through pread: nothing is read into memory whole but what OpenJPEG keeps of
 * the tiles a band crosses (for an image of one tile, that tile's compressed bytes). A band is whole
 * rows of tiles when they fit (else part of one row of tiles), at most 64 MiB of RGBA, decoded in
 * windows of whole tile columns of at most 48 MiB of OpenJPEG's 32-bit samples by default, each by an
 * OpenJPEG codec of its own: only the code-blocks a window crosses are decoded. HTJ2K (Part 15) is read
 * too, but a band of it is whole rows of tiles and a window whole tiles (OpenJPEG fills HT code-blocks
 * only for whole tiles): one whose row of tiles takes more than 512 MiB is refused (CMASTER_ERR_UNSUPPORTED)
 * when its rows are read, or when only its beginning is given. */
#ifndef CJP2_DECODER_H
#define CJP2_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include <cmaster_status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every call that can fail returns a cmaster_status (cmaster_status.h, shared by the master decoders). */

/** What the main header (and a JP2's boxes) say. */
typedef struct {
    uint32_t width;
    uint32_t height;
    int32_t components;         /* 1 gray, 2 gray + alpha, 3 colour, 4 colour + alpha or CMYK */
    int32_t precision;          /* bits of the first component, 1...16 */
    int32_t is_signed;
    int32_t has_alpha;
    int32_t is_gray;
    int32_t is_cmyk;
    int32_t is_jp2;             /* 1: a JP2 file (or a JPH file); 0: a bare codestream */
    int32_t is_htj2k;           /* 1: an HTJ2K codestream (ISO/IEC 15444-15: its CAP, COD or COC markers) */
    int32_t color_space;        /* OpenJPEG's OPJ_COLOR_SPACE */
    uint32_t tile_width, tile_height;
    uint32_t tiles_across, tiles_down;
    int32_t resolutions;        /* resolution levels of the first tile's first component */
} cjp2_header;

typedef struct cjp2_decoder cjp2_decoder;

/**
 * Reads the header of the `length` bytes of JPEG 2000 data in `fd` (not owned: it stays open until
 * destroy), or at `bytes` when `fd` is -1 (not owned either); `complete`: those are all of its bytes.
 * Else they may be only a file's beginning (an upload's first bytes): the header is read from the
 * codestream's SIZ and COD markers and the JP2's boxes, without OpenJPEG, and rows cannot be read
 * (CMASTER_ERR_STATE); CMASTER_ERR_TRUNCATED until they hold the whole main header. Before OpenJPEG allocates by the SIZ
 * marker, its components (1 to 4) and its tile count are checked: at most one tile per 14 bytes, the
 * least a tile-part takes (CMASTER_ERR_CORRUPT for complete data, CMASTER_ERR_TRUNCATED for a beginning). OpenJPEG decodes with `threads` threads;
 * a band holds at most `band_budget` bytes of its 32-bit samples (0: 48 MiB), and at least one row and
 * a 64th of a tile's rows (each band decodes its tiles anew); for HTJ2K at least a whole tile. CMASTER_ERR_UNSUPPORTED for an image it
 * does not read (subsampled components, more than 4 components, over 16 bits, sizes over 2^31);
 * CMASTER_ERR_CORRUPT or CMASTER_ERR_TRUNCATED with the message in `message` (`capacity` bytes, may be NULL).
 */
cmaster_status cjp2_decoder_open(int32_t fd, const void *bytes, uint64_t length, int32_t complete, uint32_t threads,
                              uint64_t band_budget, cjp2_decoder **out, char *message, size_t capacity);
void cjp2_decoder_destroy(cjp2_decoder *d);
void cjp2_decoder_header(const cjp2_decoder *d, cjp2_header *header);
/** The JP2's ICC profile (its colr box), owned by the decoder: *length 0 when none. */
void cjp2_decoder_icc_profile(const cjp2_decoder *d, const void **bytes, size_t *length);
/**
 * Gives up to `max_rows` rows from row `cjp2_decoder_rows_read` on into `rgba` (rows `stride` bytes
 * apart, 4 bytes a pixel), decoding the next band when the last is used up: gray repeated into R, G,
 * B; CMYK as R = round((255 - C)(255 - K) / 255) (likewise G, B); samples of P bits as
 * round(v * 255 / (2^P - 1)) (signed ones offset by 2^(P-1) first); alpha 255 where there is none.
 * *rows: how many were written. CMASTER_OK, CMASTER_DONE with the last row, or an error (the decoder is
 * then failed: every later call returns it).
 */
cmaster_status cjp2_decoder_read_rows(cjp2_decoder *d, void *rgba, size_t stride, uint32_t max_rows, uint32_t *rows);
/** Rows given so far. */
uint32_t cjp2_decoder_rows_read(const cjp2_decoder *d);
/** The errno of the read that failed (CMASTER_ERR_IO), else 0. */
int32_t cjp2_decoder_error_number(const cjp2_decoder *d);
/** The largest band decoded so far, in bytes of OpenJPEG's samples (for the memory report). */
uint64_t cjp2_decoder_band_bytes(const cjp2_decoder *d);
/** The first error's message ("" when none). */
void cjp2_decoder_copy_message(const cjp2_decoder *d, char *out, size_t capacity);
/** Whether `bytes` (at least 12 of them, or fewer: as far as they go) begin a JP2 file or a J2K codestream. */
int32_t cjp2_is_signature(const void *bytes, size_t length);

#ifdef __cplusplus
}
#endif
#endif
