/* jp2_decoder.c: JPEG 2000 masters through OpenJPEG (cjp2_decoder.h): the header, then bands of rows,
 * each decoded by a codec of its own over a window of the image, converted to RGBA. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jp2_internal.h"

cmaster_status jp2_fail(cjp2_decoder *d, cmaster_status status, const char *format, ...) {
    if (d->failure == CMASTER_OK) {
        d->failure = status;
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(d->message, sizeof d->message, format, arguments);
        va_end(arguments);
    }
    return status;
}

/* OpenJPEG's errors: the first one kept (its text ends with a newline, dropped). */
static void on_error(const char *text, void *user) {
    cjp2_decoder *d = user;
    if (d->opj_message[0]) return;
    snprintf(d->opj_message, sizeof d->opj_message, "%s", text);
    size_t n = strlen(d->opj_message);
    if (n > 0 && d->opj_message[n - 1] == '\n') d->opj_message[n - 1] = 0;
}

static void on_quiet(const char *text, void *user) { (void)text, (void)user; }

/* A codec over a fresh stream, its header read: *image is OpenJPEG's description (the caller destroys
   all three). CMASTER_ERR_TRUNCATED when the data ends inside the header. */
cmaster_status jp2_open_codec(cjp2_decoder *d, opj_codec_t **codec, opj_stream_t **stream, opj_image_t **image) {
    *image = NULL;
    *stream = jp2_stream_create(&d->cursor);
    *codec = opj_create_decompress(d->header.is_jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
    if (!*stream || !*codec) return CMASTER_ERR_NOMEM;
    opj_set_error_handler(*codec, on_error, d);
    opj_set_warning_handler(*codec, on_quiet, d);
    opj_set_info_handler(*codec, on_quiet, d);
    opj_dparameters_t parameters;
    opj_set_default_decoder_parameters(&parameters);
    if (!opj_setup_decoder(*codec, &parameters)) return CMASTER_ERR_CORRUPT;
    /* OpenJPEG's HT block decoder asserts on corrupt code-blocks: on one thread, the guard catches it. */
    /* OPJ_NUM_THREADS in the environment would give HTJ2K a pool of workers: 0 asks for none. */
    if (d->header.is_htj2k) opj_codec_set_threads(*codec, 0);
    else if (d->threads > 1 && opj_has_thread_support()) opj_codec_set_threads(*codec, (int)d->threads);
    return jp2_guarded_call(d, jp2_guarded_read_header(*stream, *codec, image, d->assertion, sizeof d->assertion));
}

cmaster_status jp2_guarded_call(cjp2_decoder *d, int result) {
    if (result > 0) return CMASTER_OK;
    if (result == 0) return jp2_failure(d);
    snprintf(d->opj_message, sizeof d->opj_message, "OpenJPEG's own check failed (%s)", d->assertion);
    return CMASTER_ERR_CORRUPT;
}

cmaster_status jp2_failure(const cjp2_decoder *d) {
    if (d->cursor.io_error) return CMASTER_ERR_IO;
    /* Bytes asked for past the end, or a tile-part longer than what is left (OpenJPEG's words). */
    if (d->cursor.short_read || strstr(d->opj_message, "stream length") || strstr(d->opj_message, "Stream too short"))
        return CMASTER_ERR_TRUNCATED;
    return CMASTER_ERR_CORRUPT;
}

void jp2_close_codec(opj_codec_t *codec, opj_stream_t *stream, opj_image_t *image) {
    if (image) opj_image_destroy(image);
    if (codec) opj_destroy_codec(codec);
    if (stream) opj_stream_destroy(stream);
}

/* The colour of `components` components from the JP2's boxes and OpenJPEG's colour space (-1: none):
   gray, gray + alpha, RGB, RGB + alpha or CMYK; the ICC profile kept. Palettes and YCC are refused.
   OpenJPEG 2.5.0 tells the colour space and the profile only after a decode: the boxes are read. */
static cmaster_status classify(cjp2_decoder *d, uint32_t components, int space) {
    cjp2_header *h = &d->header;
    jp2_colour colour = {0};
    if (h->is_jp2 && !jp2_read_colour(&d->source, &colour))
        return jp2_fail(d, CMASTER_ERR_NOMEM, "out of memory for the ICC profile");
    d->icc = colour.icc;
    d->icc_length = colour.icc_length;
    if (colour.has_palette)
        return jp2_fail(d, CMASTER_ERR_UNSUPPORTED, "JPEG 2000 images with a palette (pclr) are not read");
    int ycc = space == OPJ_CLRSPC_SYCC || space == OPJ_CLRSPC_EYCC ||
              (colour.method == 1 && (colour.enumerated == 18 || colour.enumerated == 24));
    if (ycc) return jp2_fail(d, CMASTER_ERR_UNSUPPORTED, "JPEG 2000 images in YCC (not sRGB, gray or CMYK) are not read");
    int cmyk = space == OPJ_CLRSPC_CMYK || (colour.method == 1 && colour.enumerated == 12);
    h->is_cmyk = cmyk && components == 4;
    h->is_gray = components <= 2;
    h->has_alpha = !h->is_cmyk && (components == 2 || components == 4);
    return CMASTER_OK;
}

/* What this decoder reads: 1 to 4 components of the image's full size, 1 to 16 bits. */
static cmaster_status describe(cjp2_decoder *d, opj_codec_t *codec, const opj_image_t *image) {
    cjp2_header *h = &d->header;
    if (image->x1 <= image->x0 || image->y1 <= image->y0)
        return jp2_fail(d, CMASTER_ERR_CORRUPT, "the JPEG 2000 image has no size");
    if (image->x1 > INT32_MAX || image->y1 > INT32_MAX) /* OpenJPEG's decode areas are signed 32-bit */
        return jp2_fail(d, CMASTER_ERR_UNSUPPORTED, "JPEG 2000 images reaching past 2^31 on the reference grid are not read");
    if (image->numcomps < 1 || image->numcomps > 4)
        return jp2_fail(d, CMASTER_ERR_UNSUPPORTED, "JPEG 2000 images of %u components are not read (1 to 4)", image->numcomps);
    for (uint32_t c = 0; c < image->numcomps; c++) {
        const opj_image_comp_t *comp = &image->comps[c];
        if (comp->dx != 1 || comp->dy != 1)
            return jp2_fail(d, CMASTER_ERR_UNSUPPORTED, "JPEG 2000 components subsampled %ux%u are not read", comp->dx, comp->dy);
        if (comp->prec < 1 || comp->prec > 16)
            return jp2_fail(d, CMASTER_ERR_UNSUPPORTED, "JPEG 2000 samples of %u bits are not read (1 to 16)", comp->prec);
        d->precision[c] = (int)comp->prec;
        d->is_signed[c] = comp->sgnd != 0;
    }
    cmaster_status status = classify(d, image->numcomps, image->color_space);
    if (status != CMASTER_OK) return status;
    d->x0 = image->x0;
    d->y0 = image->y0;
    h->width = image->x1 - image->x0;
    h->height = image->y1 - image->y0;
    h->components = (int32_t)image->numcomps;
    h->precision = d->precision[0];
    h->is_signed = d->is_signed[0];
    h->color_space = image->color_space;
    opj_codestream_info_v2_t *info = opj_get_cstr_info(codec);
    if (!info) return jp2_fail(d, CMASTER_ERR_NOMEM, "out of memory reading the JPEG 2000 header");
    h->tile_width = info->tdx;
    h->tile_height = info->tdy;
    h->tiles_across = info->tw;
    h->tiles_down = info->th;
    h->resolutions = (int32_t)(info->m_default_tile_info.tccp_info ? info->m_default_tile_info.tccp_info[0].numresolutions : 0);
    d->tile_x0 = info->tx0;
    d->tile_dx = info->tdx ? info->tdx : h->width;
    d->tile_y0 = info->ty0;
    d->tile_dy = info->tdy ? info->tdy : h->height;
    opj_destroy_cstr_info(&info);
    return CMASTER_OK;
}

cmaster_status jp2_check_high_throughput(cjp2_decoder *d) {
    const cjp2_header *h = &d->header;
    if (!h->is_htj2k) return CMASTER_OK;
    /* HTJ2K is decoded a row of whole tiles at a time (jp2_rows.c): its RGBA rows and one tile's
       samples must fit JP2_HT_BAND_CAP. */
    uint64_t tile_w = h->tile_width && h->tile_width < h->width ? h->tile_width : h->width;
    uint64_t tile_h = h->tile_height && h->tile_height < h->height ? h->tile_height : h->height;
    uint64_t bytes = (uint64_t)h->width * tile_h * 4 + tile_w * tile_h * (uint64_t)h->components * 4;
    if (bytes <= JP2_HT_BAND_CAP) return CMASTER_OK;
    return jp2_fail(d, CMASTER_ERR_UNSUPPORTED,
                    "HTJ2K tiles of %llux%llu are not read: OpenJPEG decodes HT code-blocks only a whole tile at a time, "
                    "and a row of these takes %llu MiB (at most %llu); re-tile the image (e.g. ojph_compress -tile_size {1024,1024})",
                    (unsigned long long)tile_w, (unsigned long long)tile_h, (unsigned long long)(bytes >> 20),
                    (unsigned long long)(JP2_HT_BAND_CAP >> 20));
}

/* The header of data that may be only a file's beginning, from its markers and boxes, without
   OpenJPEG (which allocates by the tile count before anything can be checked against the file). */
static cmaster_status read_header_only(cjp2_decoder *d) {
    jp2_markers m;
    int read = jp2_read_markers(&d->source, &m, d->message, sizeof d->message);
    if (read != 1) {
        cmaster_status status = read == 2 ? CMASTER_ERR_TRUNCATED : read < 0 ? CMASTER_ERR_UNSUPPORTED : CMASTER_ERR_CORRUPT;
        return jp2_fail(d, status, "%s", read == 2 ? "the JPEG 2000 data ends inside its header" : d->message);
    }
    if (m.x1 > INT32_MAX || m.y1 > INT32_MAX)
        return jp2_fail(d, CMASTER_ERR_UNSUPPORTED, "JPEG 2000 images reaching past 2^31 on the reference grid are not read");
    cjp2_header *h = &d->header;
    h->width = m.x1 - m.x0;
    h->height = m.y1 - m.y0;
    h->components = (int32_t)m.components;
    h->precision = m.precision[0];
    h->is_signed = m.is_signed[0];
    h->color_space = -1;
    h->tile_width = m.tile_width;
    h->tile_height = m.tile_height;
    h->tiles_across = (uint32_t)(((uint64_t)m.x1 - m.tile_x0 + m.tile_width - 1) / m.tile_width);
    h->tiles_down = (uint32_t)(((uint64_t)m.y1 - m.tile_y0 + m.tile_height - 1) / m.tile_height);
    h->resolutions = m.resolutions;
    d->header_only = 1;
    cmaster_status status = jp2_check_high_throughput(d);
    return status == CMASTER_OK ? classify(d, m.components, -1) : status;
}

cmaster_status cjp2_decoder_open(int32_t fd, const void *bytes, uint64_t length, int32_t complete, uint32_t threads,
                              uint64_t band_budget, cjp2_decoder **out, char *message, size_t capacity) {
    if (!out || (fd < 0 && !bytes)) return CMASTER_ERR_ARGUMENT;
    *out = NULL;
    cjp2_decoder *d = calloc(1, sizeof *d);
    if (!d) return CMASTER_ERR_NOMEM;
    d->source = (jp2_source){.fd = fd, .bytes = bytes, .length = length};
    d->cursor.source = &d->source;
    d->threads = threads;
    d->band_budget = band_budget ? band_budget : JP2_BAND_BUDGET;
    d->complete = complete;
    /* The first bytes tell a JP2 file from a bare codestream. */
    uint8_t head[12] = {0};
    if (bytes) memcpy(head, bytes, length < sizeof head ? (size_t)length : sizeof head);
    else if (pread(fd, head, sizeof head, 0) < 0) head[0] = 0xFF;
    d->header.is_jp2 = jp2_is_jp2(head, length < sizeof head ? (size_t)length : sizeof head);
    d->header.is_htj2k = jp2_is_high_throughput(&d->source);
    if (!complete) {
        cmaster_status status = read_header_only(d);
        if (status != CMASTER_OK) {
            if (message && capacity) snprintf(message, capacity, "%s", d->message);
            cjp2_decoder_destroy(d);
            return status;
        }
        *out = d;
        return CMASTER_OK;
    }
    int size = jp2_check_size(&d->source, complete, d->message, sizeof d->message);
    if (size != 1) {
        d->failure = size < 0 ? CMASTER_ERR_UNSUPPORTED : size == 2 ? CMASTER_ERR_TRUNCATED : CMASTER_ERR_CORRUPT;
        if (message && capacity) snprintf(message, capacity, "%s", d->message);
        cmaster_status failure = d->failure;
        cjp2_decoder_destroy(d);
        return failure;
    }
    opj_codec_t *codec;
    opj_stream_t *stream;
    opj_image_t *image;
    cmaster_status status = jp2_open_codec(d, &codec, &stream, &image);
    if (status != CMASTER_OK)
        jp2_fail(d, status, "%s", status == CMASTER_ERR_NOMEM ? "out of memory"
                              : status == CMASTER_ERR_IO ? "the JPEG 2000 file cannot be read"
                              : status == CMASTER_ERR_TRUNCATED ? "the JPEG 2000 data ends inside its header"
                              : d->opj_message[0] ? d->opj_message : "OpenJPEG cannot read the JPEG 2000 header");
    else
        status = describe(d, codec, image);
    jp2_close_codec(codec, stream, image);
    if (status != CMASTER_OK) {
        if (message && capacity) snprintf(message, capacity, "%s", d->message);
        cjp2_decoder_destroy(d);
        return status;
    }
    *out = d;
    return CMASTER_OK;
}

void cjp2_decoder_destroy(cjp2_decoder *d) {
    if (!d) return;
    free(d->icc);
    free(d->band);
    free(d);
}

void cjp2_decoder_header(const cjp2_decoder *d, cjp2_header *header) { *header = d->header; }

void cjp2_decoder_icc_profile(const cjp2_decoder *d, const void **bytes, size_t *length) {
    *bytes = d->icc;
    *length = d->icc_length;
}

uint32_t cjp2_decoder_rows_read(const cjp2_decoder *d) { return d->rows_read; }

uint64_t cjp2_decoder_band_bytes(const cjp2_decoder *d) { return d->band_bytes; }

int32_t cjp2_decoder_error_number(const cjp2_decoder *d) { return d->cursor.io_error; }

void cjp2_decoder_copy_message(const cjp2_decoder *d, char *out, size_t capacity) {
    if (out && capacity) snprintf(out, capacity, "%s", d->message);
}
