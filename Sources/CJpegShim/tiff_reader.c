/*
 * tiff_reader.c: the tiled directories of a TIFF, read once through libtiff (cjs_tiff.h): sizes,
 * codings, JPEGTables and tile tables, so that a tile's bytes are found without libtiff and read with
 * pread from any thread. Tiles that are not JPEG are decoded by libtiff (its codecs and predictors),
 * through a handle per directory opened on first use and used by one thread at a time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cjpeg_shim.h"
#include "ctiff_io.h"

enum { MAX_DIRECTORIES = 64, MAX_SUBIFDS = 32 };

typedef struct {
    cjs_tiff_directory info;
    uint64_t ifd_offset;
    uint8_t *tables;
    uint64_t *offsets;
    uint64_t *lengths;
    pthread_mutex_t lock;      /* the decoding handle below */
    tiff_file file;
    TIFF *tif;
} reader_directory;

struct cjs_tiff_reader {
    int fd;
    uint8_t *icc; /* the first directory's InterColorProfile */
    size_t icc_length;
    uint32_t count;
    reader_directory directories[MAX_DIRECTORIES];
};

static void keep(char *message, size_t capacity, const char *text) {
    if (message && capacity) snprintf(message, capacity, "%s", text);
}

static uint16_t field16(TIFF *tif, uint32_t tag, uint16_t otherwise) {
    uint16_t value = 0;
    return TIFFGetField(tif, tag, &value) ? value : otherwise;
}

/* Sizes and codings of the current directory; 0 when it is not one the reader keeps. */
static int describe(TIFF *tif, cjs_tiff_directory *d) {
    uint32_t subfile = 0;
    uint16_t count = 0, *extra = NULL;
    if (!TIFFIsTiled(tif) || !TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &d->width) ||
        !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &d->height) || !TIFFGetField(tif, TIFFTAG_TILEWIDTH, &d->tile_width) ||
        !TIFFGetField(tif, TIFFTAG_TILELENGTH, &d->tile_height))
        return 0;
    if (d->width == 0 || d->height == 0 || d->tile_width == 0 || d->tile_height == 0 || d->tile_width > 65536 ||
        d->tile_height > 65536)
        return 0;
    d->columns = (uint32_t)(((uint64_t)d->width + d->tile_width - 1) / d->tile_width);
    d->rows = (uint32_t)(((uint64_t)d->height + d->tile_height - 1) / d->tile_height);
    d->compression = field16(tif, TIFFTAG_COMPRESSION, COMPRESSION_NONE);
    d->photometric = field16(tif, TIFFTAG_PHOTOMETRIC, 0xFFFF);
    d->samples_per_pixel = field16(tif, TIFFTAG_SAMPLESPERPIXEL, 1);
    d->bits_per_sample = field16(tif, TIFFTAG_BITSPERSAMPLE, 1);
    d->planar = field16(tif, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &count, &extra) && count > 0 && extra)
        d->has_alpha = extra[count - 1] == EXTRASAMPLE_ASSOCALPHA || extra[count - 1] == EXTRASAMPLE_UNASSALPHA;
    d->h_subsampling = d->v_subsampling = 1;
    if (d->photometric == PHOTOMETRIC_YCBCR)
        TIFFGetFieldDefaulted(tif, TIFFTAG_YCBCRSUBSAMPLING, &d->h_subsampling, &d->v_subsampling);
    if (TIFFGetField(tif, TIFFTAG_SUBFILETYPE, &subfile)) d->is_reduced = (subfile & FILETYPE_REDUCEDIMAGE) != 0;
    return 1;
}

/* Keeps the current directory (if tiled and within the limits): its description, tables, tile table. */
static cjs_status keep_directory(cjs_tiff_reader *r, TIFF *tif, int is_subifd, uint64_t max_tiles) {
    if (r->count >= MAX_DIRECTORIES) return CJS_OK;
    reader_directory *d = &r->directories[r->count];
    memset(d, 0, sizeof *d);
    if (!describe(tif, &d->info)) return CJS_OK;
    uint64_t tiles = (uint64_t)d->info.columns * d->info.rows;
    if (tiles > max_tiles || TIFFNumberOfTiles(tif) != tiles) return CJS_OK;
    uint32_t length = 0;
    void *tables = NULL;
    if (d->info.compression == COMPRESSION_JPEG && TIFFGetField(tif, TIFFTAG_JPEGTABLES, &length, &tables) &&
        tables && length > 0) {
        if (!(d->tables = malloc(length))) return CJS_ERR_NOMEM;
        memcpy(d->tables, tables, length);
        d->info.jpeg_tables = d->tables;
        d->info.jpeg_tables_length = length;
    }
    d->offsets = malloc((size_t)tiles * sizeof *d->offsets);
    d->lengths = malloc((size_t)tiles * sizeof *d->lengths);
    if (!d->offsets || !d->lengths) {
        free(d->tables);
        free(d->offsets);
        free(d->lengths);
        return CJS_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < tiles; i++) {
        d->offsets[i] = TIFFGetStrileOffset(tif, (uint32_t)i);
        d->lengths[i] = TIFFGetStrileByteCount(tif, (uint32_t)i);
    }
    d->info.is_subifd = is_subifd;
    d->ifd_offset = TIFFCurrentDirOffset(tif);
    d->file.fd = r->fd;
    pthread_mutex_init(&d->lock, NULL);
    r->count++;
    return CJS_OK;
}

/* The current directory's InterColorProfile, copied (none over 16 MiB: a profile is kilobytes). */
static cjs_status keep_profile(cjs_tiff_reader *r, TIFF *tif) {
    uint32_t length = 0;
    void *profile = NULL;
    if (!TIFFGetField(tif, TIFFTAG_ICCPROFILE, &length, &profile) || !profile || length == 0 || length > (16u << 20))
        return CJS_OK;
    if (!(r->icc = malloc(length))) return CJS_ERR_NOMEM;
    memcpy(r->icc, profile, length);
    r->icc_length = length;
    return CJS_OK;
}

/* Every directory of the chain, then the first one's SubIFDs. */
static cjs_status read_directories(cjs_tiff_reader *r, TIFF *tif, uint64_t max_tiles) {
    uint64_t subifds[MAX_SUBIFDS];
    uint16_t subifd_count = 0;
    int index = 0;
    cjs_status status = CJS_OK;
    do {
        status = index == 0 ? keep_profile(r, tif) : CJS_OK;
        if (status == CJS_OK) status = keep_directory(r, tif, 0, max_tiles);
        uint16_t n = 0;
        uint64_t *offsets = NULL;
        if (index == 0 && TIFFGetField(tif, TIFFTAG_SUBIFD, &n, &offsets) && offsets) {
            subifd_count = n < MAX_SUBIFDS ? n : MAX_SUBIFDS;
            memcpy(subifds, offsets, subifd_count * sizeof *subifds);
        }
        index++;
    } while (status == CJS_OK && index < MAX_DIRECTORIES && TIFFReadDirectory(tif));
    for (uint16_t i = 0; i < subifd_count && status == CJS_OK; i++)
        if (TIFFSetSubDirectory(tif, subifds[i])) status = keep_directory(r, tif, 1, max_tiles);
    return status;
}

/* Reads the directories of the TIFF `file` reads. `missed`, when given, says the read went past the bytes
   known (a remote TIFF's): nothing is kept then, CJS_ERR_IO without a message. */
static cjs_status open_reader(tiff_file *file, int32_t fd, uint64_t max_tiles, const uint64_t *missed,
                              cjs_tiff_reader **out, char *message, size_t capacity) {
    if (!out) return CJS_ERR_ARGUMENT;
    *out = NULL;
    cjs_tiff_reader *r = calloc(1, sizeof *r);
    if (!r) return CJS_ERR_NOMEM;
    r->fd = fd;
    /* libtiff's own cap on one allocation: a forged directory cannot make it ask for gigabytes. */
    TIFF *tif = tiff_io_open(file, "r", (tmsize_t)256 << 20);
    if (!tif) {
        if (!(missed && *missed)) keep(message, capacity, file->message);
        free(r);
        return missed && *missed ? CJS_ERR_IO : CJS_ERR_ARGUMENT;
    }
    cjs_status status = read_directories(r, tif, max_tiles ? max_tiles : (uint64_t)1 << 24);
    TIFFClose(tif);
    if (status == CJS_OK && missed && *missed) status = CJS_ERR_IO;
    else if (status == CJS_OK && r->count == 0) {
        keep(message, capacity, file->message[0] ? file->message : "the TIFF has no tiled image");
        status = CJS_ERR_ARGUMENT;
    }
    if (status != CJS_OK) {
        cjs_tiff_reader_destroy(r);
        return status;
    }
    *out = r;
    return CJS_OK;
}

cjs_status cjs_tiff_reader_open(int32_t fd, uint64_t max_tiles, cjs_tiff_reader **out, char *message,
                                size_t capacity) {
    tiff_file file = {.fd = fd};
    return open_reader(&file, fd, max_tiles, NULL, out, message, capacity);
}

/* The bytes known of a remote TIFF: a read of bytes all held (in one segment or several that touch) is
   served; any other fails and records the first range missed. */
typedef struct {
    const cjs_tiff_segment *segments;
    size_t count;
    uint64_t size;
    uint64_t missing_offset, missing_length;
} known_bytes;

/* The segment holding byte `offset`, or NULL. */
static const cjs_tiff_segment *segment_at(const known_bytes *k, uint64_t offset) {
    size_t low = 0, high = k->count; /* the last segment that starts at or before `offset` */
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (k->segments[middle].offset <= offset) low = middle + 1;
        else high = middle;
    }
    if (low == 0) return NULL;
    const cjs_tiff_segment *s = &k->segments[low - 1];
    return offset - s->offset < s->length ? s : NULL;
}

static tmsize_t read_known(void *context, uint64_t offset, void *buffer, tmsize_t size) {
    known_bytes *k = context;
    if (size <= 0 || offset >= k->size) return 0;
    uint64_t want = (uint64_t)size < k->size - offset ? (uint64_t)size : k->size - offset, done = 0;
    while (done < want) {
        const cjs_tiff_segment *s = segment_at(k, offset + done);
        if (!s) {
            if (!k->missing_length) {
                k->missing_offset = offset + done;
                k->missing_length = want - done;
            }
            return -1;
        }
        uint64_t into = offset + done - s->offset, n = s->length - into < want - done ? s->length - into : want - done;
        memcpy((uint8_t *)buffer + done, (const uint8_t *)s->bytes + into, (size_t)n);
        done += n;
    }
    return (tmsize_t)want;
}

cjs_status cjs_tiff_reader_open_segments(const cjs_tiff_segment *segments, size_t count, uint64_t size,
                                         uint64_t max_tiles, cjs_tiff_reader **out, uint64_t *missing_offset,
                                         uint64_t *missing_length, char *message, size_t capacity) {
    if (!missing_offset || !missing_length || (count && !segments)) return CJS_ERR_ARGUMENT;
    for (size_t i = 1; i < count; i++)
        if (segments[i].offset < segments[i - 1].offset + segments[i - 1].length) return CJS_ERR_ARGUMENT;
    known_bytes known = {.segments = segments, .count = count, .size = size};
    tiff_file file = {.fd = -1, .read_at = read_known, .context = &known, .size = size};
    cjs_status status = open_reader(&file, -1, max_tiles, &known.missing_length, out, message, capacity);
    *missing_offset = known.missing_offset;
    *missing_length = known.missing_length;
    return status;
}

void cjs_tiff_reader_icc_profile(const cjs_tiff_reader *r, const void **data, size_t *length) {
    *data = r->icc;
    *length = r->icc_length;
}

void cjs_tiff_reader_destroy(cjs_tiff_reader *r) {
    if (!r) return;
    for (uint32_t i = 0; i < r->count; i++) {
        reader_directory *d = &r->directories[i];
        if (d->tif) TIFFClose(d->tif);
        free(d->tables);
        free(d->offsets);
        free(d->lengths);
        pthread_mutex_destroy(&d->lock);
    }
    free(r->icc);
    free(r);
}

uint32_t cjs_tiff_reader_directory_count(const cjs_tiff_reader *r) { return r->count; }

cjs_status cjs_tiff_reader_directory(const cjs_tiff_reader *r, uint32_t index, cjs_tiff_directory *out) {
    if (index >= r->count || !out) return CJS_ERR_ARGUMENT;
    *out = r->directories[index].info;
    return CJS_OK;
}

cjs_status cjs_tiff_reader_locate(const cjs_tiff_reader *r, uint32_t directory, uint32_t column, uint32_t row,
                                  uint64_t *offset, uint64_t *length) {
    if (directory >= r->count) return CJS_ERR_ARGUMENT;
    const reader_directory *d = &r->directories[directory];
    if (column >= d->info.columns || row >= d->info.rows) return CJS_ERR_ARGUMENT;
    size_t index = (size_t)row * d->info.columns + column;
    *offset = d->offsets[index];
    *length = d->lengths[index];
    return CJS_OK;
}

/* Converts one decoded tile row of 8-bit samples into RGBA. */
static void to_rgba(const uint8_t *in, uint8_t *out, uint32_t width, const cjs_tiff_directory *info) {
    int spp = info->samples_per_pixel, invert = info->photometric == PHOTOMETRIC_MINISWHITE;
    for (uint32_t x = 0; x < width; x++, in += spp, out += 4) {
        if (spp <= 2) {
            uint8_t v = invert ? (uint8_t)(255 - in[0]) : in[0];
            out[0] = out[1] = out[2] = v;
            out[3] = spp == 2 && info->has_alpha ? in[1] : 255;
        } else {
            out[0] = in[0];
            out[1] = in[1];
            out[2] = in[2];
            out[3] = spp >= 4 && info->has_alpha ? in[3] : 255;
        }
    }
}

static int decodable(const cjs_tiff_directory *i) {
    int gray = (i->photometric == PHOTOMETRIC_MINISBLACK || i->photometric == PHOTOMETRIC_MINISWHITE) &&
               (i->samples_per_pixel == 1 || (i->samples_per_pixel == 2 && i->has_alpha));
    int rgb = i->photometric == PHOTOMETRIC_RGB &&
              (i->samples_per_pixel == 3 || (i->samples_per_pixel == 4 && i->has_alpha));
    return (gray || rgb) && i->bits_per_sample == 8 && i->planar == PLANARCONFIG_CONTIG &&
           i->compression != COMPRESSION_JPEG && i->tile_width <= 8192 && i->tile_height <= 8192;
}

/* Decodes tile `index` with the directory's handle (its lock held). */
static cjs_status decode_locked(reader_directory *d, uint32_t index, uint8_t *rgba, size_t stride, char *message,
                                size_t capacity) {
    if (!d->tif) {
        d->file.position = 0;
        d->file.message[0] = 0;
        d->tif = tiff_io_open(&d->file, "r", (tmsize_t)256 << 20);
        if (!d->tif || !TIFFSetSubDirectory(d->tif, d->ifd_offset)) {
            keep(message, capacity, d->file.message);
            if (d->tif) TIFFClose(d->tif);
            d->tif = NULL;
            return CJS_ERR_IO;
        }
    }
    tmsize_t size = TIFFTileSize(d->tif);
    const cjs_tiff_directory *info = &d->info;
    size_t row_bytes = (size_t)info->tile_width * (size_t)info->samples_per_pixel;
    if (size <= 0 || (size_t)size < row_bytes * info->tile_height) return CJS_ERR_ARGUMENT;
    uint8_t *samples = malloc((size_t)size);
    if (!samples) return CJS_ERR_NOMEM;
    d->file.message[0] = 0;
    if (TIFFReadEncodedTile(d->tif, index, samples, size) < 0) {
        keep(message, capacity, d->file.message[0] ? d->file.message : "libtiff cannot decode the tile");
        free(samples);
        return CJS_ERR_IO;
    }
    for (uint32_t y = 0; y < info->tile_height; y++)
        to_rgba(samples + y * row_bytes, rgba + y * stride, info->tile_width, info);
    free(samples);
    return CJS_OK;
}

cjs_status cjs_tiff_reader_decode(cjs_tiff_reader *r, uint32_t directory, uint32_t column, uint32_t row, void *rgba,
                                  size_t stride, char *message, size_t capacity) {
    if (directory >= r->count || !rgba) return CJS_ERR_ARGUMENT;
    reader_directory *d = &r->directories[directory];
    if (column >= d->info.columns || row >= d->info.rows || stride < (size_t)d->info.tile_width * 4)
        return CJS_ERR_ARGUMENT;
    if (!decodable(&d->info)) {
        keep(message, capacity, "this tile coding is not read (8-bit gray, RGB or RGBA, contiguous, only)");
        return CJS_ERR_ARGUMENT;
    }
    pthread_mutex_lock(&d->lock);
    cjs_status status = decode_locked(d, row * d->info.columns + column, rgba, stride, message, capacity);
    pthread_mutex_unlock(&d->lock);
    return status;
}
