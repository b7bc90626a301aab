/* jp2_stream.c: OpenJPEG streams over a file read with pread, or over bytes in memory. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jp2_internal.h"

static OPJ_SIZE_T stream_read(void *buffer, OPJ_SIZE_T size, void *user) {
    jp2_cursor *c = user;
    const jp2_source *s = c->source;
    if (c->position >= s->length) {
        c->short_read = 1;
        return (OPJ_SIZE_T)-1; /* OpenJPEG's end of stream */
    }
    uint64_t left = s->length - c->position;
    size_t wanted = size < left ? size : (size_t)left;
    if (wanted < size) c->short_read = 1;
    if (!s->bytes) {
        size_t done = 0;
        while (done < wanted) {
            ssize_t n = pread(s->fd, (uint8_t *)buffer + done, wanted - done, (off_t)(c->position + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                if (n < 0) c->io_error = errno;
                c->short_read = 1;
                break;
            }
            done += (size_t)n;
        }
        wanted = done;
    } else {
        memcpy(buffer, s->bytes + c->position, wanted);
    }
    c->position += wanted;
    return wanted ? wanted : (OPJ_SIZE_T)-1;
}

static OPJ_OFF_T stream_skip(OPJ_OFF_T count, void *user) {
    jp2_cursor *c = user;
    if (count < 0 && (uint64_t)-count > c->position) return -1;
    c->position += (uint64_t)count; /* past the end: the next read says so */
    return count;
}

static OPJ_BOOL stream_seek(OPJ_OFF_T offset, void *user) {
    jp2_cursor *c = user;
    if (offset < 0 || (uint64_t)offset > c->source->length) return OPJ_FALSE;
    c->position = (uint64_t)offset;
    return OPJ_TRUE;
}

opj_stream_t *jp2_stream_create(jp2_cursor *cursor) {
    cursor->position = 0;
    cursor->short_read = 0;
    cursor->io_error = 0;
    opj_stream_t *stream = opj_stream_create(1 << 16, OPJ_TRUE);
    if (!stream) return NULL;
    opj_stream_set_read_function(stream, stream_read);
    opj_stream_set_skip_function(stream, stream_skip);
    opj_stream_set_seek_function(stream, stream_seek);
    opj_stream_set_user_data(stream, cursor, NULL);
    opj_stream_set_user_data_length(stream, cursor->source->length);
    return stream;
}

static const uint8_t jp2_signature[12] = {0, 0, 0, 0x0C, 'j', 'P', ' ', ' ', 0x0D, 0x0A, 0x87, 0x0A};
static const uint8_t j2k_signature[4] = {0xFF, 0x4F, 0xFF, 0x51};

int jp2_is_jp2(const uint8_t *head, size_t length) {
    return length >= sizeof jp2_signature && memcmp(head, jp2_signature, sizeof jp2_signature) == 0;
}

int32_t cjp2_is_signature(const void *bytes, size_t length) {
    if (!bytes || length == 0) return 0;
    size_t jp2 = length < sizeof jp2_signature ? length : sizeof jp2_signature;
    size_t j2k = length < sizeof j2k_signature ? length : sizeof j2k_signature;
    /* A codestream needs two bytes to be told from a JPEG (both begin with 0xFF). */
    return memcmp(bytes, jp2_signature, jp2) == 0 || (length >= 2 && memcmp(bytes, j2k_signature, j2k) == 0);
}

/* `count` bytes at `offset` of the source; 0 when they are not all there. */
static int read_at(const jp2_source *s, uint64_t offset, void *out, size_t count) {
    if (offset > s->length || count > s->length - offset) return 0;
    if (s->bytes) {
        memcpy(out, s->bytes + offset, count);
        return 1;
    }
    size_t done = 0;
    while (done < count) {
        ssize_t n = pread(s->fd, (uint8_t *)out + done, count - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 0;
        done += (size_t)n;
    }
    return 1;
}

/* A box header at `offset` within [offset, end): its type, where its contents start and end. */
static int read_box(const jp2_source *s, uint64_t offset, uint64_t end, uint32_t *type, uint64_t *start, uint64_t *stop) {
    uint8_t h[16];
    if (offset + 8 > end || !read_at(s, offset, h, 8)) return 0;
    uint64_t length = (uint64_t)h[0] << 24 | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 8 | h[3];
    *type = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
    *start = offset + 8;
    if (length == 1) { /* XLBox */
        if (!read_at(s, offset + 8, h + 8, 8)) return 0;
        length = 0;
        for (int i = 8; i < 16; i++) length = length << 8 | h[i];
        *start = offset + 16;
    } else if (length == 0) {
        length = end - offset; /* to the end */
    }
    if (length < *start - offset || length > end - offset) return 0;
    *stop = offset + length;
    return 1;
}

#define BOX(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (uint32_t)(d))

int jp2_read_icc(const jp2_source *s, uint8_t **out, size_t *length) {
    *out = NULL;
    *length = 0;
    uint64_t at = 0, start, stop;
    uint32_t type;
    while (read_box(s, at, s->length, &type, &start, &stop) && type != BOX('j', 'p', '2', 'c')) {
        if (type == BOX('j', 'p', '2', 'h')) {
            uint64_t inner = start, inner_start, inner_stop;
            while (read_box(s, inner, stop, &type, &inner_start, &inner_stop)) {
                uint8_t method;
                if (type == BOX('c', 'o', 'l', 'r')) { /* the first colr box is the one that counts */
                    if (!read_at(s, inner_start, &method, 1) || method != 2 || inner_stop - inner_start <= 3) return 1;
                    uint64_t count = inner_stop - inner_start - 3;
                    if (count > (16u << 20)) return 1;
                    if (!(*out = malloc((size_t)count))) return 0;
                    if (!read_at(s, inner_start + 3, *out, (size_t)count)) {
                        free(*out);
                        *out = NULL;
                        return 1;
                    }
                    *length = (size_t)count;
                    return 1;
                }
                inner = inner_stop;
            }
            return 1;
        }
        at = stop;
    }
    return 1;
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* Where the codestream starts: 0 for a bare one, else the contents of the JP2's jp2c box. */
static int codestream_start(const jp2_source *s, uint64_t *start) {
    uint8_t head[12];
    if (!read_at(s, 0, head, s->length < 12 ? (size_t)s->length : 12)) return 0;
    if (!jp2_is_jp2(head, s->length < 12 ? (size_t)s->length : 12)) {
        *start = 0;
        return 1;
    }
    uint64_t at = 0, inner, stop;
    uint32_t type;
    uint8_t box[8];
    /* The jp2c box as OpenJPEG takes it: whatever length it declares (past the data, too). */
    while (read_at(s, at, box, 8)) {
        if (be32(box + 4) == BOX('j', 'p', '2', 'c')) {
            *start = at + (be32(box) == 1 ? 16 : 8);
            return 1;
        }
        if (!read_box(s, at, s->length, &type, &inner, &stop)) return 0;
        at = stop;
    }
    return 0;
}

int jp2_check_size(const jp2_source *s, int complete, char *message, size_t capacity) {
    uint64_t start;
    uint8_t siz[2 + 2 + 2 + 2 + 32 + 2];
    /* SOC, then SIZ: Lsiz, Rsiz, Xsiz, Ysiz, XOsiz, YOsiz, XTsiz, YTsiz, XTOsiz, YTOsiz, Csiz. */
    if (!codestream_start(s, &start) || !read_at(s, start, siz, sizeof siz)) return 1; /* OpenJPEG says what is missing */
    if (siz[0] != 0xFF || siz[1] != 0x4F) return 1; /* not a codestream: OpenJPEG refuses it */
    if (siz[2] != 0xFF || siz[3] != 0x51) { /* OpenJPEG would skip to a SIZ further on */
        snprintf(message, capacity, "the JPEG 2000 codestream's SIZ marker does not follow its SOC");
        return 0;
    }
    const uint8_t *f = siz + 8;
    uint64_t x = be32(f), y = be32(f + 4), x0 = be32(f + 8), y0 = be32(f + 12);
    uint64_t tw = be32(f + 16), th = be32(f + 20), tx0 = be32(f + 24), ty0 = be32(f + 28);
    uint32_t components = (uint32_t)siz[40] << 8 | siz[41];
    if (components < 1 || components > 4) {
        snprintf(message, capacity, "JPEG 2000 images of %u components are not read (1 to 4)", components);
        return -1;
    }
    if (x <= x0 || y <= y0 || tw == 0 || th == 0 || tx0 > x0 || ty0 > y0) return 1; /* OpenJPEG refuses these */
    uint64_t tiles = ((x - tx0 + tw - 1) / tw) * ((y - ty0 + th - 1) / th);
    /* Every tile has at least one tile-part: SOT (12 bytes) and SOD (2). */
    if (tiles > s->length / 14 + 1) {
        snprintf(message, capacity, "the JPEG 2000 declares %llu tiles, more than %s %llu bytes can hold",
                 (unsigned long long)tiles, complete ? "its" : "the first", (unsigned long long)s->length);
        return complete ? 0 : 2;
    }
    return 1;
}
