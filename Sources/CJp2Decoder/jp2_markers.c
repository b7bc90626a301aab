/* jp2_markers.c: what a codestream's markers say before OpenJPEG reads it: where it starts, what its
   tiles cost to decode, whether it is HTJ2K. */
#include <stdlib.h>
#include <string.h>

#include "jp2_internal.h"

/* Where the codestream starts: 0 for a bare one, else the contents of the JP2's jp2c box. */
static int codestream_start(const jp2_source *s, uint64_t *start) {
    uint8_t head[12];
    if (!jp2_read_at(s, 0, head, s->length < 12 ? (size_t)s->length : 12)) return 0;
    if (!jp2_is_jp2(head, s->length < 12 ? (size_t)s->length : 12)) {
        *start = 0;
        return 1;
    }
    uint64_t at = 0, inner, stop;
    uint32_t type;
    uint8_t box[8];
    /* The jp2c box as OpenJPEG takes it: whatever length it declares (past the data, too). */
    while (jp2_read_at(s, at, box, 8)) {
        if (jp2_be32(box + 4) == BOX('j', 'p', '2', 'c')) {
            *start = at + (jp2_be32(box) == 1 ? 16 : 8);
            return 1;
        }
        if (!jp2_read_box(s, at, s->length, &type, &inner, &stop)) return 0;
        at = stop;
    }
    return 0;
}

/* Code-blocks of one component of a tile of `area` pixels, by the coding style bytes of a COD or COC
   (`sp`: levels, xcb, ycb, style, transform) and, when the style has them, its precinct sizes (`pp`:
   one PPx | PPy << 4 byte a resolution; NULL: none, 2^15). Resolution 0 is the LL band, of
   area / 4^levels; resolution r > 0 three bands of area / 4^(levels - r + 1). OpenJPEG makes a band's
   code-blocks no larger than its precincts: 2^PP at resolution 0, 2^(PP - 1) above (a COD of 64 x 64
   code-blocks with 2 x 2 precincts codes 1 x 1 blocks). At least one block a band. */
static uint64_t code_blocks(uint64_t area, const uint8_t sp[3], const uint8_t *pp) {
    uint32_t levels = sp[0] > 32 ? 32 : sp[0]; /* OpenJPEG refuses more */
    uint64_t blocks = 0;
    for (uint32_t r = 0; r <= levels; r++) {
        uint32_t shift = 2 * (levels - r + (r > 0 ? 1 : 0));
        uint64_t band = shift >= 64 ? 0 : area >> shift;
        uint32_t w = (sp[1] & 0x0F) + 2u, h = (sp[2] & 0x0F) + 2u;
        if (pp) {
            uint32_t px = pp[r] & 0x0F, py = pp[r] >> 4;
            if (r > 0) px = px ? px - 1 : 0, py = py ? py - 1 : 0;
            if (px < w) w = px;
            if (py < h) h = py;
        }
        uint64_t per_band = (band >> (w + h)) + 1;
        blocks += r > 0 ? 3 * per_band : per_band;
    }
    return blocks;
}

/* What a tile's markers make OpenJPEG allocate before it reads a packet, by the COD and COC markers in
   the main header and in every tile-part header (SOT ... SOD, tile-parts followed by their Psot):
   - `packets`: the most packets one tile can have (quality layers x resolutions x components); each
     packet takes at least a byte, and OpenJPEG allocates by layers for every code-block before it
     reads any (a few hundred bytes that declare 65,535 layers took it 16 s);
   - `blocks`: the most code-blocks one component of a tile of `area` pixels has by any COD or COC
     (``code_blocks``): OpenJPEG allocates a structure of a few hundred bytes for every code-block of
     a tile, however few bytes code them (a 242-byte codestream of 4x4 code-blocks declaring
     16384 x 16384 pixels took 7 GB).
   `at`: the first marker after SIZ. Stops where the markers stop making sense (OpenJPEG then says
   what is wrong). */
typedef struct {
    uint64_t packets;
    uint64_t blocks;
} tile_cost;

/* The coding style at `sp_at` (levels, xcb, ycb, style, transform, then the precincts when `scod` says
   so), its code-blocks for `area` counted into `cost`. 0 when the bytes are not there. */
static int count_style(const jp2_source *s, uint64_t sp_at, uint8_t scod, uint64_t area, tile_cost *cost) {
    uint8_t sp[5], pp[33];
    if (!jp2_read_at(s, sp_at, sp, sizeof sp)) return 0;
    uint32_t resolutions = (sp[0] > 32 ? 32u : sp[0]) + 1u;
    int precincts = scod & 1;
    if (precincts && !jp2_read_at(s, sp_at + 5, pp, resolutions)) return 0;
    uint64_t blocks = code_blocks(area, sp, precincts ? pp : NULL);
    if (blocks > cost->blocks) cost->blocks = blocks;
    return 1;
}

static tile_cost scan_markers(const jp2_source *s, uint64_t at, uint32_t components, uint64_t area) {
    static const uint8_t default_style[3] = {5, 4, 4}; /* OpenJPEG's defaults, if no COD is read */
    tile_cost cost = {.packets = 0, .blocks = code_blocks(area, default_style, NULL)};
    uint64_t tile_start = 0, tile_length = 0;
    for (;;) {
        uint8_t m[4];
        if (!jp2_read_at(s, at, m, 4) || m[0] != 0xFF || m[1] == 0xD9) break; /* the end, or EOC */
        uint32_t size = (uint32_t)m[2] << 8 | m[3];
        if (m[1] == 0x93) { /* SOD: the tile-part's data, to the next tile-part (Psot 0: the last) */
            if (tile_length == 0 || tile_start + tile_length <= at) break;
            at = tile_start + tile_length;
            tile_length = 0;
            continue;
        }
        if (m[1] == 0x90) { /* SOT: Lsot, Isot (2), Psot (4), TPsot, TNsot */
            uint8_t psot[4];
            if (size != 10 || !jp2_read_at(s, at + 6, psot, 4)) break;
            tile_start = at, tile_length = jp2_be32(psot);
        } else if (m[1] == 0x52 && size >= 12) { /* COD: Lcod, Scod, order, layers (2), MCT, SPcod */
            uint8_t c[6]; /* Scod, order, layers (2), MCT, levels */
            if (!jp2_read_at(s, at + 4, c, sizeof c)) break;
            uint64_t packets = (uint64_t)((uint32_t)c[2] << 8 | c[3]) * (c[5] + 1u) * components;
            if (packets > cost.packets) cost.packets = packets;
            if (!count_style(s, at + 9, c[0], area, &cost)) break;
        } else if (m[1] == 0x53 && size >= 9) { /* COC: Lcoc, Ccoc (1 byte, 2 past 256 components), Scoc, SPcoc */
            uint64_t scoc_at = at + 4 + (components < 257 ? 1 : 2);
            uint8_t scoc;
            if (!jp2_read_at(s, scoc_at, &scoc, 1) || !count_style(s, scoc_at + 1, scoc, area, &cost)) break;
        }
        if (size < 2) break;
        at += 2 + size;
    }
    return cost;
}

int jp2_check_size(const jp2_source *s, int complete, char *message, size_t capacity) {
    uint64_t start;
    uint8_t siz[2 + 2 + 2 + 2 + 32 + 2];
    /* SOC, then SIZ: Lsiz, Rsiz, Xsiz, Ysiz, XOsiz, YOsiz, XTsiz, YTsiz, XTOsiz, YTOsiz, Csiz. */
    /* No codestream yet, or one that ends before its SIZ: the data is cut (OpenJPEG would call a JP2
       whose boxes end early corrupt). */
    if (!codestream_start(s, &start) || !jp2_read_at(s, start, siz, sizeof siz)) {
        snprintf(message, capacity, "the JPEG 2000 data ends before its codestream's header");
        return 2;
    }
    if (siz[0] != 0xFF || siz[1] != 0x4F) return 1; /* not a codestream: OpenJPEG refuses it */
    if (siz[2] != 0xFF || siz[3] != 0x51) { /* OpenJPEG would skip to a SIZ further on */
        snprintf(message, capacity, "the JPEG 2000 codestream's SIZ marker does not follow its SOC");
        return 0;
    }
    const uint8_t *f = siz + 8;
    uint64_t x = jp2_be32(f), y = jp2_be32(f + 4), x0 = jp2_be32(f + 8), y0 = jp2_be32(f + 12);
    uint64_t tw = jp2_be32(f + 16), th = jp2_be32(f + 20), tx0 = jp2_be32(f + 24), ty0 = jp2_be32(f + 28);
    uint32_t components = (uint32_t)siz[40] << 8 | siz[41];
    if (components == 0) {
        snprintf(message, capacity, "the JPEG 2000 codestream declares no component");
        return 0;
    }
    if (components > 4) {
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
    /* The largest tile's area: the code-blocks of every resolution cover it once per component. */
    uint64_t tile_area = (tw < x - x0 ? tw : x - x0) * (th < y - y0 ? th : y - y0);
    tile_cost cost = scan_markers(s, start + 4 + ((uint32_t)siz[4] << 8 | siz[5]), components, tile_area);
    if (cost.packets > s->length) {
        snprintf(message, capacity, "the JPEG 2000 declares %llu packets a tile (quality layers x resolutions x components), more than %s %llu bytes can hold",
                 (unsigned long long)cost.packets, complete ? "its" : "the first", (unsigned long long)s->length);
        return complete ? 0 : 2;
    }
    /* A real image codes a code-block in a byte or more on average; JP2_FREE_CODE_BLOCKS (about 150 MB
       of OpenJPEG's structures) are allowed whatever the bytes. */
    uint64_t allowed = JP2_FREE_CODE_BLOCKS + s->length;
    if (cost.blocks > allowed / components) {
        uint64_t blocks = cost.blocks > UINT64_MAX / components ? UINT64_MAX : cost.blocks * components;
        snprintf(message, capacity, "the JPEG 2000 declares %llu code-blocks in a tile (its code-block and precinct sizes), more than %s %llu bytes can code",
                 (unsigned long long)blocks, complete ? "its" : "the first", (unsigned long long)s->length);
        return complete ? 0 : 2;
    }
    return 1;
}

/* Markers a header of the codestream is read through at most, and tile-parts: past them, the
   codestream is taken for HTJ2K (decoded on one thread, where OpenJPEG's assertions are caught). */
#define HT_SCAN_MARKERS 4096
#define HT_SCAN_TILE_PARTS 65536

/* Whether OpenJPEG reads a header's marker `code` by its length: the segments of main and tile-part
   headers it knows (ISO/IEC 15444-1 A.2, -2's MCT, MCC, MCO and CBD, -15's CAP and CPF). Any other
   (EOC or SOC in a header too) it reads past byte by byte, looking for the next marker it knows, which
   a length-wise scan would not see. */
static int is_known_segment(uint8_t code) {
    switch (code) {
    case 0x50: case 0x51: case 0x52: case 0x53: case 0x55: case 0x57: case 0x58: case 0x59: case 0x5C: case 0x5D:
    case 0x5E: case 0x5F: case 0x60: case 0x61: case 0x63: case 0x64: case 0x74: case 0x75: case 0x77: case 0x78:
        return 1;
    default:
        return 0;
    }
}

/* Whether the markers from `*at` up to SOT or SOD (the one that ends the header: main or tile-part)
   say HT (1), not (0), or cannot be read through (-1: not markers, a marker OpenJPEG scans past, or
   too many; taken for HT), or the data ends first (-2: a file's beginning, read again whole); *at is
   left at that marker. */
static int header_says_high_throughput(const jp2_source *s, uint64_t *at, uint32_t components) {
    for (int markers = 0; markers < HT_SCAN_MARKERS; markers++) {
        uint8_t marker[8];
        if (!jp2_read_at(s, *at, marker, 4)) return -2;
        if (marker[0] != 0xFF) return -1;
        if (marker[1] == 0x90 || marker[1] == 0x93) return 0;
        if (!is_known_segment(marker[1])) return -1;
        uint32_t size = (uint32_t)marker[2] << 8 | marker[3];
        if (size < 2) return -1;
        uint8_t style;
        if (marker[1] == 0x50 && size >= 6 && jp2_read_at(s, *at + 4, marker + 4, 4) && (jp2_be32(marker + 4) & 0x00020000))
            return 1;
        /* COD: Lcod, Scod, SGcod (4), then SPcod: levels, xcb, ycb, style. */
        if (marker[1] == 0x52 && size >= 12 && jp2_read_at(s, *at + 2 + 2 + 1 + 4 + 3, &style, 1) && (style & 0x40)) return 1;
        /* COC: Lcoc, Ccoc (1 byte, 2 past 256 components), Scoc, then SPcoc: levels, xcb, ycb, style. */
        uint32_t ccoc = components < 257 ? 1 : 2;
        if (marker[1] == 0x53 && size >= 2 + ccoc + 1 + 4 && jp2_read_at(s, *at + 2 + 2 + ccoc + 1 + 3, &style, 1) && (style & 0x40))
            return 1;
        *at += 2 + size;
    }
    return -1;
}

int jp2_is_high_throughput(const jp2_source *s) {
    uint64_t start;
    uint8_t head[6 + 36];
    if (!codestream_start(s, &start) || !jp2_read_at(s, start, head, sizeof head)) return 0;
    if (head[0] != 0xFF || head[1] != 0x4F || head[2] != 0xFF || head[3] != 0x51) return 0;
    uint32_t components = (uint32_t)head[40] << 8 | head[41];
    /* ISO/IEC 15444-15: the CAP marker's Pcap bit for Part 15 (0x00020000, the 15th from the most
       significant) says the code-blocks may be HT ones; a COD or COC whose code-block style has bit 6
       (0x40) says they are, and is what OpenJPEG decodes by (a file may lack the CAP marker), in the
       main header or in any tile-part's (OpenJPEG takes COD and COC there too). */
    uint64_t at = start + 4 + ((uint32_t)head[4] << 8 | head[5]);
    int says = header_says_high_throughput(s, &at, components);
    if (says != 0) return says == 1 || says == -1;
    for (int parts = 0; parts < HT_SCAN_TILE_PARTS; parts++) {
        uint8_t sot[12];
        if (!jp2_read_at(s, at, sot, sizeof sot) || sot[0] != 0xFF || sot[1] != 0x90) return 0;  /* EOC, or the data's end */
        uint64_t psot = jp2_be32(sot + 6), tile_part = at;
        at += sizeof sot;
        says = header_says_high_throughput(s, &at, components);
        if (says != 0) return says == 1 || says == -1;
        if (psot == 0) return 0;  /* the last tile-part, to EOC */
        at = tile_part + psot;
    }
    return 1;
}

int jp2_read_markers(const jp2_source *s, jp2_markers *m, char *message, size_t capacity) {
    uint64_t start;
    uint8_t head[4];
    memset(m, 0, sizeof *m);
    if (!codestream_start(s, &start)) return 2;
    if (!jp2_read_at(s, start, head, 4)) return 2;
    if (head[0] != 0xFF || head[1] != 0x4F || head[2] != 0xFF || head[3] != 0x51) {
        snprintf(message, capacity, "the JPEG 2000 codestream does not start with SOC and SIZ");
        return 0;
    }
    uint8_t siz[2 + 2 + 32 + 2]; /* Lsiz, Rsiz, 8 sizes and offsets, Csiz */
    if (!jp2_read_at(s, start + 4, siz, sizeof siz)) return 2;
    uint32_t length = (uint32_t)siz[0] << 8 | siz[1];
    const uint8_t *f = siz + 4;
    m->x1 = jp2_be32(f), m->y1 = jp2_be32(f + 4), m->x0 = jp2_be32(f + 8), m->y0 = jp2_be32(f + 12);
    m->tile_width = jp2_be32(f + 16), m->tile_height = jp2_be32(f + 20), m->tile_x0 = jp2_be32(f + 24), m->tile_y0 = jp2_be32(f + 28);
    m->components = (uint32_t)f[32] << 8 | f[33];
    if (m->components < 1 || m->components > 4 || length != 38 + 3 * m->components) {
        snprintf(message, capacity, "JPEG 2000 images of %u components are not read (1 to 4)", m->components);
        return m->components < 1 || m->components > 4 ? -1 : 0;
    }
    uint8_t sampling[12];
    if (!jp2_read_at(s, start + 4 + 2 + 36, sampling, 3 * m->components)) return 2;
    for (uint32_t c = 0; c < m->components; c++) {
        m->precision[c] = (sampling[3 * c] & 0x7F) + 1;
        m->is_signed[c] = (sampling[3 * c] & 0x80) != 0;
        if (sampling[3 * c + 1] != 1 || sampling[3 * c + 2] != 1) {
            snprintf(message, capacity, "JPEG 2000 components subsampled %ux%u are not read", sampling[3 * c + 1], sampling[3 * c + 2]);
            return -1;
        }
        if (m->precision[c] > 16) {
            snprintf(message, capacity, "JPEG 2000 samples of %d bits are not read (1 to 16)", m->precision[c]);
            return -1;
        }
    }
    if (m->x1 <= m->x0 || m->y1 <= m->y0 || m->tile_width == 0 || m->tile_height == 0 || m->tile_x0 > m->x0 || m->tile_y0 > m->y0) {
        snprintf(message, capacity, "the JPEG 2000 codestream's SIZ marker is not valid");
        return 0;
    }
    /* The markers after SIZ, to COD's decomposition levels (SOT or EOC ends the main header). */
    uint64_t at = start + 4 + length;
    for (;;) {
        uint8_t marker[4];
        if (!jp2_read_at(s, at, marker, 4)) return 2;
        if (marker[0] != 0xFF) break;
        if (marker[1] == 0x90 || marker[1] == 0xD9) break;
        uint32_t size = (uint32_t)marker[2] << 8 | marker[3];
        if (marker[1] == 0x52) { /* COD: Lcod, Scod, SGcod (4), then SPcod's decomposition levels */
            uint8_t levels;
            if (size < 8) break;
            if (!jp2_read_at(s, at + 2 + 2 + 1 + 4, &levels, 1)) return 2;
            m->resolutions = levels + 1;
            return 1;
        }
        if (size < 2) break;
        at += 2 + size;
    }
    snprintf(message, capacity, "the JPEG 2000 main header has no COD marker");
    return 0;
}
