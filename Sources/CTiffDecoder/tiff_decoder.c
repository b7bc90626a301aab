/* tiff_decoder.c: the TIFF master decoder's files, directory and header (ctiff_decoder.h). Rows are
 * read and converted in tiff_rows.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cspool.h"
#include "decoder_internal.h"

/* libtiff's cap on one allocation (a strip's compressed bytes read whole, a colour map, ...). */
static const tmsize_t max_allocation = (tmsize_t)256 << 20;

cmaster_status ctiff_fail(ctiff_decoder *d, cmaster_status status, const char *format, ...) {
    if (d->failure == CMASTER_OK) {
        d->failure = status;
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(d->message, sizeof d->message, format, arguments);
        va_end(arguments);
    }
    return status;
}

cmaster_status ctiff_decoder_create(const char *path, const char *spool_directory, uint32_t page,
                                  ctiff_decoder **out, int *error_number) {
    if (!out || (!path && !spool_directory)) return CMASTER_ERR_ARGUMENT;
    *out = NULL;
    /* Non-blocking, so that a FIFO at the path is never waited on: only a regular file is read. */
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : cspool_create(spool_directory);
    if (fd < 0) {
        if (error_number) *error_number = errno;
        return CMASTER_ERR_IO;
    }
    struct stat info;
    if (path && (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))) {
        close(fd);
        return CMASTER_ERR_ARGUMENT; /* not a regular file: the caller spools the bytes instead */
    }
    ctiff_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        close(fd);
        return CMASTER_ERR_NOMEM;
    }
    d->file.fd = fd;
    d->spooling = path == NULL;
    d->page = page;
    d->alpha_index = -1;
    *out = d;
    return CMASTER_OK;
}

void ctiff_decoder_destroy(ctiff_decoder *d) {
    if (!d) return;
    if (d->tif) TIFFClose(d->tif);
    close(d->file.fd);
    free(d->band);
    free(d->tile);
    free(d->samples);
    free(d->page_sizes);
    free(d);
}

cmaster_status ctiff_decoder_feed(ctiff_decoder *d, const void *bytes, size_t length) {
    if (d->failure != CMASTER_OK) return d->failure;
    if (d->ended) return ctiff_fail(d, CMASTER_ERR_STATE, "bytes fed after the end of the input");
    if (!d->spooling) {
        d->fed += length;
        return CMASTER_OK;
    }
    const uint8_t *p = bytes;
    while (length > 0) {
        ssize_t n = pwrite(d->file.fd, p, length, (off_t)d->fed);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            d->file.error_number = n < 0 ? errno : ENOSPC;
            return ctiff_fail(d, CMASTER_ERR_IO, "cannot spool the TIFF to a temporary file: %s",
                              strerror(d->file.error_number));
        }
        p += n;
        length -= (size_t)n;
        d->fed += (uint64_t)n;
    }
    return CMASTER_OK;
}

cmaster_status ctiff_decoder_end_input(ctiff_decoder *d) {
    if (d->failure != CMASTER_OK) return d->failure;
    d->ended = 1;
    return CMASTER_OK;
}

static uint64_t file_size(const ctiff_decoder *d) {
    struct stat info;
    return fstat(d->file.fd, &info) == 0 ? (uint64_t)info.st_size : 0;
}

/* Why libtiff could not open the file: truncated when the header, or the first directory it points
   at, lies past the end of the file. */
static cmaster_status open_failure(ctiff_decoder *d) {
    uint8_t head[16] = {0};
    uint64_t size = file_size(d);
    ssize_t n = pread(d->file.fd, head, sizeof head, 0);
    int little = n >= 2 && head[0] == 'I' && head[1] == 'I';
    int big = n >= 2 && head[0] == 'M' && head[1] == 'M';
    uint64_t version = little ? (uint64_t)head[2] | (uint64_t)head[3] << 8 : (uint64_t)head[2] << 8 | head[3];
    uint64_t offset = 0;
    int header = version == 43 ? 16 : 8;
    for (int i = 0; i < (version == 43 ? 8 : 4); i++) {
        int at = (version == 43 ? 8 : 4) + (little ? i : (version == 43 ? 7 : 3) - i);
        offset |= (uint64_t)head[at] << (8 * i);
    }
    if ((little || big) && (n < header || offset + 2 > size))
        return ctiff_fail(d, CMASTER_ERR_TRUNCATED, "the TIFF ends before its first directory (%llu bytes)",
                          (unsigned long long)size);
    return ctiff_fail(d, CMASTER_ERR_CORRUPT, "%s", d->file.message[0] ? d->file.message : "libtiff cannot open the file");
}

cmaster_status ctiff_check_extent(ctiff_decoder *d, uint32_t index) {
    int error = 0;
    uint64_t offset = TIFFGetStrileOffsetWithErr(d->tif, index, &error);
    uint64_t count = error ? 0 : TIFFGetStrileByteCountWithErr(d->tif, index, &error);
    if (error) return ctiff_fail(d, CMASTER_ERR_CORRUPT, "the TIFF's strip or tile %u cannot be located", index);
    uint64_t size = file_size(d);
    if (offset > size || count > size - offset)
        return ctiff_fail(d, CMASTER_ERR_TRUNCATED, "the TIFF ends (%llu bytes) before its strip or tile %u",
                          (unsigned long long)size, index);
    return CMASTER_OK;
}

/* The colour map at 8 bits: as stored when every entry is under 256 (an 8-bit map, as some writers
   make), else round(v * 255 / 65535). */
static int read_palette(ctiff_decoder *d) {
    uint16_t *map[3] = {NULL, NULL, NULL};
    int entries = 1 << d->header.bits_per_sample;
    if (!TIFFGetField(d->tif, TIFFTAG_COLORMAP, &map[0], &map[1], &map[2])) return 0;
    int eight = 1;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < entries; i++) eight &= map[c][i] < 256;
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < entries; i++)
            d->palette[i][c] = (uint8_t)(eight ? map[c][i] : ((uint32_t)map[c][i] * 255 + 32767) / 65535);
    return 1;
}

/* The bit depths read for each kind of pixel. */
static int depth_read(pixel_kind kind, int photometric, int bits) {
    int low = bits == 1 || bits == 2 || bits == 4;
    switch (kind) {
    case KIND_GRAY: return low || bits == 8 || bits == 16;
    case KIND_PALETTE: return low || bits == 8;
    case KIND_RGB: return bits == 8 || (bits == 16 && photometric == PHOTOMETRIC_RGB);
    case KIND_CMYK: return bits == 8 || bits == 16;
    }
    return 0;
}

/* How the pixels are made into RGB: the photometric interpretation. */
static cmaster_status choose_kind(ctiff_decoder *d) {
    ctiff_header *h = &d->header;
    uint16_t inks = INKSET_CMYK;
    switch (h->photometric) {
    case PHOTOMETRIC_MINISWHITE:
    case PHOTOMETRIC_MINISBLACK:
        d->kind = KIND_GRAY, d->colour_samples = 1, h->is_gray = 1;
        d->min_is_white = h->photometric == PHOTOMETRIC_MINISWHITE;
        return CMASTER_OK;
    case PHOTOMETRIC_RGB: d->kind = KIND_RGB, d->colour_samples = 3; return CMASTER_OK;
    case PHOTOMETRIC_PALETTE:
        d->kind = KIND_PALETTE, d->colour_samples = 1;
        if (h->bits_per_sample <= 8 && !read_palette(d)) return ctiff_fail(d, CMASTER_ERR_CORRUPT, "a palette TIFF without a colour map");
        return CMASTER_OK;
    case PHOTOMETRIC_SEPARATED:
        TIFFGetFieldDefaulted(d->tif, TIFFTAG_INKSET, &inks);
        if (inks != INKSET_CMYK || h->samples_per_pixel < 4)
            return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "separated TIFFs other than CMYK are not read");
        d->kind = KIND_CMYK, d->colour_samples = 4, h->is_cmyk = 1;
        return CMASTER_OK;
    case PHOTOMETRIC_YCBCR:
        if (h->planar == PLANARCONFIG_SEPARATE) /* libjpeg upsamples to RGB only for contiguous data */
            return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "YCbCr TIFFs in separate planes are not read");
        if (h->compression != COMPRESSION_JPEG)
            return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "YCbCr TIFFs are read only with JPEG compression (this one has compression %d)",
                              h->compression);
        if (h->samples_per_pixel != 3) /* libjpeg gives the three as RGB: there is no fourth to read */
            return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "YCbCr TIFFs of %d samples a pixel are not read (3 only)", h->samples_per_pixel);
        /* libjpeg converts to RGB: the rows are RGB from here on. */
        if (!TIFFSetField(d->tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB)) return ctiff_fail(d, CMASTER_ERR_CORRUPT, "%s", d->file.message);
        d->kind = KIND_RGB, d->colour_samples = 3;
        return CMASTER_OK;
    default:
        return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "TIFFs of photometric interpretation %d are not read", h->photometric);
    }
}

/* The samples checked against the kind of pixel, and the alpha found among the extra samples. */
static cmaster_status choose_samples(ctiff_decoder *d) {
    ctiff_header *h = &d->header;
    if (!depth_read(d->kind, h->photometric, h->bits_per_sample))
        return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "%d-bit samples are not read for photometric interpretation %d",
                          h->bits_per_sample, h->photometric);
    if (h->samples_per_pixel < d->colour_samples)
        return ctiff_fail(d, CMASTER_ERR_CORRUPT, "%d samples a pixel are too few for photometric interpretation %d",
                          h->samples_per_pixel, h->photometric);
    uint16_t extra_count = 0, *extra = NULL;
    TIFFGetFieldDefaulted(d->tif, TIFFTAG_EXTRASAMPLES, &extra_count, &extra);
    for (int i = 0; i < extra_count && d->colour_samples + i < h->samples_per_pixel; i++) {
        if (extra[i] != EXTRASAMPLE_ASSOCALPHA && extra[i] != EXTRASAMPLE_UNASSALPHA) continue;
        d->alpha_index = d->colour_samples + i;
        h->has_alpha = 1;
        h->alpha_associated = extra[i] == EXTRASAMPLE_ASSOCALPHA;
        break;
    }
    return CMASTER_OK;
}

/* Tiles or strips, orientation, resolution and ICC profile, into the header. */
static void read_layout_and_metadata(ctiff_decoder *d) {
    ctiff_header *h = &d->header;
    uint16_t orientation = 0, unit = RESUNIT_INCH;
    if (h->tiled) {
        TIFFGetField(d->tif, TIFFTAG_TILEWIDTH, &h->tile_width);
        TIFFGetField(d->tif, TIFFTAG_TILELENGTH, &h->tile_height);
    } else {
        TIFFGetFieldDefaulted(d->tif, TIFFTAG_ROWSPERSTRIP, &h->rows_per_strip);
    }
    if (TIFFGetField(d->tif, TIFFTAG_ORIENTATION, &orientation)) h->orientation = orientation;
    float x = 0, y = 0;
    if (TIFFGetField(d->tif, TIFFTAG_XRESOLUTION, &x) && TIFFGetField(d->tif, TIFFTAG_YRESOLUTION, &y)) {
        TIFFGetFieldDefaulted(d->tif, TIFFTAG_RESOLUTIONUNIT, &unit);
        h->resolution_unit = unit, h->x_resolution = x, h->y_resolution = y;
    }
    uint32_t icc_length = 0;
    void *icc = NULL;
    if (TIFFGetField(d->tif, TIFFTAG_ICCPROFILE, &icc_length, &icc) && icc && icc_length > 0)
        d->icc = icc, d->icc_length = icc_length;
}

/* Whether the current directory is a page: not a reduced-resolution copy of another (a pyramid's
   level, a preview) nor a transparency mask, by its NewSubfileType. */
static int is_page(TIFF *tif) {
    uint32_t subfile = 0;
    return !TIFFGetField(tif, TIFFTAG_SUBFILETYPE, &subfile) || (subfile & (FILETYPE_REDUCEDIMAGE | FILETYPE_MASK)) == 0;
}

/* Counts the pages of the main chain, reading its directories in order as tiffinfo does (at most
   CTIFF_MOST_DIRECTORIES), and sets the directory of page `page`; 0 when there is no such page or its
   directory cannot be read again. The first directory is page 0 whatever it says. A directory past the
   one chosen that libtiff cannot read ends the count there; its message is not kept. */
static void record_page_size(ctiff_decoder *d) {
    if (!d->page_sizes || d->page_sizes_count >= CTIFF_MOST_DIRECTORIES) return;
    ctiff_page_size *size = &d->page_sizes[d->page_sizes_count++];
    uint16_t orientation = 0;
    *size = (ctiff_page_size){0};
    TIFFGetField(d->tif, TIFFTAG_IMAGEWIDTH, &size->width);
    TIFFGetField(d->tif, TIFFTAG_IMAGELENGTH, &size->height);
    if (TIFFGetField(d->tif, TIFFTAG_ORIENTATION, &orientation)) size->orientation = orientation;
}

static int choose_page(ctiff_decoder *d, uint32_t *pages) {
    tdir_t chosen = 0, n = 0;
    *pages = 1;
    free(d->page_sizes);
    d->page_sizes = malloc(sizeof(ctiff_page_size) * CTIFF_MOST_DIRECTORIES); /* none recorded when NULL */
    d->page_sizes_count = 0;
    record_page_size(d);
    while (n + 1 < CTIFF_MOST_DIRECTORIES && TIFFReadDirectory(d->tif)) {
        n++;
        if (!is_page(d->tif)) continue;
        record_page_size(d);
        if (*pages == d->page) chosen = n;
        (*pages)++;
    }
    d->file.message[0] = 0;
    if (d->page >= *pages) return 0;
    return TIFFSetDirectory(d->tif, chosen);
}

static cmaster_status read_directory(ctiff_decoder *d) {
    ctiff_header *h = &d->header;
    uint32_t pages = 1;
    if (!choose_page(d, &pages)) {
        if (d->page < pages) return ctiff_fail(d, CMASTER_ERR_CORRUPT, "the TIFF's directory of page %u cannot be read", d->page);
        return ctiff_fail(d, CMASTER_ERR_ARGUMENT, "the TIFF has no page %u (it has %u)", d->page, pages);
    }
    uint32_t width = 0, height = 0;
    uint16_t bits = 1, samples = 1, format = SAMPLEFORMAT_UINT, photometric = 0, compression = 1, planar = 1;
    if (!TIFFGetField(d->tif, TIFFTAG_IMAGEWIDTH, &width) || !TIFFGetField(d->tif, TIFFTAG_IMAGELENGTH, &height))
        return ctiff_fail(d, CMASTER_ERR_CORRUPT, "the TIFF's directory has no image size");
    if (!TIFFGetField(d->tif, TIFFTAG_PHOTOMETRIC, &photometric))
        return ctiff_fail(d, CMASTER_ERR_CORRUPT, "the TIFF's directory has no photometric interpretation");
    TIFFGetFieldDefaulted(d->tif, TIFFTAG_BITSPERSAMPLE, &bits);
    TIFFGetFieldDefaulted(d->tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
    TIFFGetFieldDefaulted(d->tif, TIFFTAG_SAMPLEFORMAT, &format);
    TIFFGetFieldDefaulted(d->tif, TIFFTAG_COMPRESSION, &compression);
    TIFFGetFieldDefaulted(d->tif, TIFFTAG_PLANARCONFIG, &planar);
    *h = (ctiff_header){.width = width, .height = height, .bits_per_sample = bits, .samples_per_pixel = samples,
                        .photometric = photometric, .compression = compression, .planar = planar,
                        .tiled = TIFFIsTiled(d->tif) != 0, .big_tiff = TIFFIsBigTIFF(d->tif) != 0,
                        .big_endian = TIFFIsBigEndian(d->tif) != 0, .page_count = pages};
    read_layout_and_metadata(d);
    if (width == 0 || height == 0) return ctiff_fail(d, CMASTER_ERR_CORRUPT, "the TIFF declares an empty image");
    if (format != SAMPLEFORMAT_UINT)
        return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "TIFFs of sample format %d are not read (unsigned integers only)", format);
    if (!TIFFIsCODECConfigured(compression))
        return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "TIFF compression %d is not available in this libtiff", compression);
    if (h->tiled && (h->tile_width == 0 || h->tile_height == 0)) return ctiff_fail(d, CMASTER_ERR_CORRUPT, "the TIFF's tiles have no size");
    /* Tiles are copied into rows byte by byte: a tile row must end on a byte (TIFF asks for widths in
       multiples of 16, which always do; libtiff only warns about others). */
    uint64_t in_plane = planar == PLANARCONFIG_SEPARATE ? 1 : samples;
    if (h->tiled && ((uint64_t)h->tile_width * in_plane * bits) % 8 != 0)
        return ctiff_fail(d, CMASTER_ERR_UNSUPPORTED, "tiles %u pixels wide of %d-bit samples are not read", h->tile_width, bits);
    cmaster_status status = choose_kind(d);
    return status == CMASTER_OK ? choose_samples(d) : status;
}

cmaster_status ctiff_decoder_read_header(ctiff_decoder *d, ctiff_header *header) {
    if (d->failure != CMASTER_OK) return d->failure;
    if (!d->header_read) {
        if (d->spooling && !d->ended) return CMASTER_NEED_DATA;
        d->tif = tiff_io_open(&d->file, "r", max_allocation);
        if (!d->tif) return open_failure(d);
        cmaster_status status = read_directory(d);
        if (status != CMASTER_OK) return status;
        d->file_size = file_size(d);
        d->header_read = 1;
    }
    if (header) *header = d->header;
    return CMASTER_OK;
}

cmaster_status ctiff_decoder_state(const ctiff_decoder *d, int32_t *finished) {
    *finished = d->ended && d->header_read && d->rows_read == d->header.height;
    return d->failure;
}

uint32_t ctiff_decoder_rows_read(const ctiff_decoder *d) { return d->rows_read; }

int ctiff_decoder_error_number(const ctiff_decoder *d) { return d->file.error_number; }

void ctiff_decoder_copy_message(const ctiff_decoder *d, char *out, size_t capacity) {
    if (!out || capacity == 0) return;
    snprintf(out, capacity, "%s", d->message);
}

uint32_t ctiff_decoder_page_sizes(const ctiff_decoder *d, ctiff_page_size *out, uint32_t capacity) {
    if (!d->header_read || !d->page_sizes) return 0;
    uint32_t count = d->page_sizes_count < capacity ? d->page_sizes_count : capacity;
    memcpy(out, d->page_sizes, sizeof(ctiff_page_size) * count);
    return count;
}

const char *ctiff_decoder_text_tag(const ctiff_decoder *d, uint32_t tag) {
    if (!d->tif || !d->header_read || d->failure != CMASTER_OK) return NULL;
    if (tag != TIFFTAG_IMAGEDESCRIPTION && tag != TIFFTAG_DATETIME && tag != TIFFTAG_ARTIST && tag != TIFFTAG_COPYRIGHT) return NULL;
    char *text = NULL;
    return TIFFGetField(d->tif, tag, &text) && text ? text : NULL;
}

void ctiff_decoder_icc_profile(const ctiff_decoder *d, const void **bytes, size_t *length) {
    *bytes = d->icc;
    *length = d->icc_length;
}
