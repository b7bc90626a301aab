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
        c->short_read = 1; /* OpenJPEG wants bytes past the end: the data ends early */
        return (OPJ_SIZE_T)-1; /* OpenJPEG's end of stream */
    }
    uint64_t left = s->length - c->position;
    size_t wanted = size < left ? size : (size_t)left;
    if (!s->bytes) {
        size_t done = 0;
        while (done < wanted) {
            ssize_t n = pread(s->fd, (uint8_t *)buffer + done, wanted - done, (off_t)(c->position + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                c->io_error = n < 0 ? errno : EIO; /* the file is shorter than it was, or failed */
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
int jp2_read_at(const jp2_source *s, uint64_t offset, void *out, size_t count) {
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

uint32_t jp2_be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* A box header at `offset` within [offset, end): its type, where its contents start and end. */
int jp2_read_box(const jp2_source *s, uint64_t offset, uint64_t end, uint32_t *type, uint64_t *start, uint64_t *stop) {
    uint8_t h[16];
    if (offset + 8 > end || !jp2_read_at(s, offset, h, 8)) return 0;
    uint64_t length = (uint64_t)h[0] << 24 | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 8 | h[3];
    *type = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | h[7];
    *start = offset + 8;
    if (length == 1) { /* XLBox */
        if (!jp2_read_at(s, offset + 8, h + 8, 8)) return 0;
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

/* The first colr box's method, enumerated colour space and ICC profile; whether jp2h holds a palette. */
static int read_colour_box(const jp2_source *s, uint64_t start, uint64_t stop, jp2_colour *colour) {
    uint8_t head[7];
    if (stop - start < 3 || !jp2_read_at(s, start, head, stop - start >= 7 ? 7 : 3)) return 1;
    colour->method = head[0];
    if (head[0] == 1 && stop - start >= 7) colour->enumerated = jp2_be32(head + 3);
    if (head[0] != 2 || stop - start - 3 > (16u << 20)) return 1;
    size_t count = (size_t)(stop - start - 3);
    if (!(colour->icc = malloc(count))) return 0;
    if (!jp2_read_at(s, start + 3, colour->icc, count)) {
        free(colour->icc);
        colour->icc = NULL;
        return 1;
    }
    colour->icc_length = count;
    return 1;
}

int jp2_read_colour(const jp2_source *s, jp2_colour *colour) {
    memset(colour, 0, sizeof *colour);
    uint64_t at = 0, start, stop;
    uint32_t type;
    while (jp2_read_box(s, at, s->length, &type, &start, &stop) && type != BOX('j', 'p', '2', 'c')) {
        if (type == BOX('j', 'p', '2', 'h')) {
            uint64_t inner = start, inner_start, inner_stop;
            int seen_colour = 0;
            while (jp2_read_box(s, inner, stop, &type, &inner_start, &inner_stop)) {
                if (type == BOX('p', 'c', 'l', 'r')) colour->has_palette = 1;
                if (type == BOX('c', 'd', 'e', 'f')) colour->has_channel_definitions = 1;
                /* The first colr box is the one that counts. */
                if (type == BOX('c', 'o', 'l', 'r') && !seen_colour) {
                    seen_colour = 1;
                    if (!read_colour_box(s, inner_start, inner_stop, colour)) return 0;
                }
                inner = inner_stop;
            }
            return 1;
        }
        at = stop;
    }
    return 1;
}
