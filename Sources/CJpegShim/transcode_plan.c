/* transcode_plan.c: which JPEGs level 0 can be copied from, and the tables and headers of its tiles. */
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "cjpeg_shim.h"
#include "errors.h"
#include "transcode_plan.h"

const uint8_t plan_natural_order[DCTSIZE2] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63,
};

static int gcd(int a, int b) {
    while (b) {
        int r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static void copy_huffman(plan_huffman *out, const JHUFF_TBL *table) {
    memcpy(out->bits, table->bits, sizeof out->bits);
    memcpy(out->values, table->huffval, sizeof out->values);
}

/* libjpeg's optimal-table builder (Annex K.2 with the 16-bit length limit): exported by libjpeg-turbo,
   declared in its internal jchuff.h. freq has 257 entries; ERREXITs only on a broken table. */
extern void jpeg_gen_optimal_table(j_compress_ptr cinfo, JHUFF_TBL *htbl, long freq[]);

/* The symbols a baseline table may need: DC categories 0...11; AC end-of-block, ZRL, and runs 0...15
   with sizes 1...10. */
static int is_baseline_symbol(int dc, int symbol) {
    if (dc) return symbol <= 11;
    return symbol == 0x00 || symbol == 0xF0 || ((symbol & 15) >= 1 && (symbol & 15) <= 10);
}

/* Adds a source table's code lengths to `freq` as pseudo-frequencies (a code of L bits, 2^(20 - L)). */
static void add_lengths(long freq[257], const JHUFF_TBL *table) {
    int k = 0;
    for (int length = 1; length <= 16; length++)
        for (int i = 0; i < table->bits[length] && k < 256; i++, k++) freq[table->huffval[k]] += 1L << (20 - length);
}

/*
 * Level 0's Huffman tables from a baseline source's own, which are optimal (or standard) for these very
 * blocks: the same AC symbols come out, only the DC differences at tile edges differ. Every baseline
 * symbol the source never coded is added at frequency 1 (a long code), so that any block can be coded.
 * Chroma's table merges the chroma components' tables. 0, or -1 (keep the standard tables).
 */
static int source_tables(j_decompress_ptr source, transcode_plan *p, j_compress_ptr c) {
    if (source->progressive_mode || source->arith_code) return -1;
    int classes = p->components == 3 ? 2 : 1;
    for (int dc = 0; dc <= 1; dc++)
        for (int t = 0; t < classes; t++) {
            long freq[257] = {0};
            for (int ci = 0; ci < p->components; ci++) {
                if ((ci == 0) != (t == 0)) continue;
                int slot = dc ? source->comp_info[ci].dc_tbl_no : source->comp_info[ci].ac_tbl_no;
                const JHUFF_TBL *table = slot >= 0 && slot < NUM_HUFF_TBLS
                                             ? (dc ? source->dc_huff_tbl_ptrs[slot] : source->ac_huff_tbl_ptrs[slot])
                                             : NULL;
                if (!table) return -1;
                add_lengths(freq, table);
            }
            for (int symbol = 0; symbol < 256; symbol++) {
                if (!is_baseline_symbol(dc, symbol)) freq[symbol] = 0;
                else if (freq[symbol] == 0) freq[symbol] = 1;
            }
            JHUFF_TBL *out = dc ? c->dc_huff_tbl_ptrs[t] : c->ac_huff_tbl_ptrs[t];
            jpeg_gen_optimal_table(c, out, freq);
            copy_huffman(dc ? &p->dc[t] : &p->ac[t], out);
        }
    return 0;
}

/* The tiles' Huffman tables: the source's made complete (source_tables), or libjpeg's standard tables
   (Annex K.3), which code every baseline symbol; both through a compressor made for the purpose.
   0, or -1 when libjpeg fails (out of memory). */
static int huffman_tables(j_decompress_ptr source, transcode_plan *p) {
    struct jpeg_compress_struct c;
    cjs_error_mgr err;
    cjs_error_init(&err, 0);
    c.err = &err.pub;
    volatile int created = 0;
    if (setjmp(err.jump)) { /* jpeg_create_compress, jpeg_set_defaults, jpeg_gen_optimal_table */
        if (created) jpeg_destroy_compress(&c);
        return -1;
    }
    jpeg_create_compress(&c);
    created = 1;
    c.in_color_space = JCS_YCbCr;
    c.input_components = 3;
    jpeg_set_defaults(&c);
    for (int i = 0; i < 2; i++) {
        copy_huffman(&p->dc[i], c.dc_huff_tbl_ptrs[i]);
        copy_huffman(&p->ac[i], c.ac_huff_tbl_ptrs[i]);
    }
    if (p->source_tables) source_tables(source, p, &c);
    jpeg_destroy_compress(&c);
    return 0;
}

static int refuse(char *reason, size_t capacity, const char *text) {
    if (reason && capacity) snprintf(reason, capacity, "%s", text);
    return -1;
}

/* The tile's sampling: the source's, divided by the factors all components share. */
static int sampling(j_decompress_ptr cinfo, transcode_plan *p, char *reason, size_t capacity) {
    int gh = 0, gv = 0;
    for (int ci = 0; ci < p->components; ci++) {
        gh = gcd(gh, cinfo->comp_info[ci].h_samp_factor);
        gv = gcd(gv, cinfo->comp_info[ci].v_samp_factor);
    }
    p->max_h = p->max_v = 1;
    for (int ci = 0; ci < p->components; ci++) {
        plan_component *c = &p->component[ci];
        c->h = cinfo->comp_info[ci].h_samp_factor / gh;
        c->v = cinfo->comp_info[ci].v_samp_factor / gv;
        c->source_v = cinfo->comp_info[ci].v_samp_factor;
        if (c->h > p->max_h) p->max_h = c->h;
        if (c->v > p->max_v) p->max_v = c->v;
    }
    if (p->components == 3) {
        const plan_component *y = &p->component[0];
        if (p->component[1].h != 1 || p->component[1].v != 1 || p->component[2].h != 1 || p->component[2].v != 1)
            return refuse(reason, capacity, "its chroma sampling is not one TIFF can state");
        if ((y->h != 1 && y->h != 2 && y->h != 4) || (y->v != 1 && y->v != 2 && y->v != 4) || y->v > y->h)
            return refuse(reason, capacity, "its luma sampling is not one TIFF can state");
    }
    if (p->tile_size % (uint32_t)(8 * p->max_h) || p->tile_size % (uint32_t)(8 * p->max_v))
        return refuse(reason, capacity, "its MCU does not divide the tile size");
    p->sub_rows = cinfo->max_v_samp_factor / p->max_v;
    return 0;
}

/* The quantisation tables the components use, as the source has them. */
static int quantisation(j_decompress_ptr cinfo, transcode_plan *p, char *reason, size_t capacity) {
    for (int ci = 0; ci < p->components; ci++) {
        int slot = cinfo->comp_info[ci].quant_tbl_no;
        const JQUANT_TBL *table = slot >= 0 && slot < NUM_QUANT_TBLS ? cinfo->quant_tbl_ptrs[slot] : NULL;
        if (!table) return refuse(reason, capacity, "a component has no quantisation table");
        p->component[ci].quant = slot;
        p->quant_used[slot] = 1;
        for (int k = 0; k < DCTSIZE2; k++) {
            if (table->quantval[k] == 0) return refuse(reason, capacity, "a quantisation table holds a zero");
            if (table->quantval[k] > 255) p->extended = 1;
            p->quant[slot][k] = table->quantval[k];
        }
    }
    return 0;
}

static uint8_t *put16(uint8_t *out, unsigned value) {
    out[0] = (uint8_t)(value >> 8);
    out[1] = (uint8_t)value;
    return out + 2;
}

static uint8_t *put_dht(uint8_t *out, int class_, int index, const plan_huffman *h) {
    int count = 0;
    for (int l = 1; l <= 16; l++) count += h->bits[l];
    *out++ = 0xFF;
    *out++ = 0xC4;
    out = put16(out, (unsigned)(2 + 1 + 16 + count));
    *out++ = (uint8_t)(class_ << 4 | index);
    memcpy(out, h->bits + 1, 16);
    memcpy(out + 16, h->values, (size_t)count);
    return out + 16 + count;
}

/* JPEGTables: SOI, the DQTs, the DHTs, EOI. */
static int write_tables(transcode_plan *p) {
    p->tables = malloc(2 + 4 * (5 + 128) + 4 * (5 + 16 + 256) + 2);
    if (!p->tables) return -1;
    uint8_t *out = p->tables;
    *out++ = 0xFF;
    *out++ = 0xD8;
    for (int slot = 0; slot < NUM_QUANT_TBLS; slot++) {
        if (!p->quant_used[slot]) continue;
        *out++ = 0xFF;
        *out++ = 0xDB;
        out = put16(out, (unsigned)(2 + 1 + (p->extended ? 128 : 64)));
        *out++ = (uint8_t)((p->extended ? 0x10 : 0) | slot);
        for (int k = 0; k < DCTSIZE2; k++) {
            unsigned q = p->quant[slot][plan_natural_order[k]];
            if (p->extended) out = put16(out, q);
            else *out++ = (uint8_t)q;
        }
    }
    int tables = p->components == 3 ? 2 : 1;
    for (int i = 0; i < tables; i++) {
        out = put_dht(out, 0, i, &p->dc[i]);
        out = put_dht(out, 1, i, &p->ac[i]);
    }
    *out++ = 0xFF;
    *out++ = 0xD9;
    p->tables_length = (size_t)(out - p->tables);
    return 0;
}

/* SOI, SOF0 (SOF1 with 16-bit tables) for a tile, SOS. */
static void write_header(transcode_plan *p) {
    uint8_t *out = p->header;
    *out++ = 0xFF;
    *out++ = 0xD8;
    *out++ = 0xFF;
    *out++ = p->extended ? 0xC1 : 0xC0;
    out = put16(out, (unsigned)(8 + 3 * p->components));
    *out++ = 8;
    out = put16(out, p->tile_size);
    out = put16(out, p->tile_size);
    *out++ = (uint8_t)p->components;
    for (int ci = 0; ci < p->components; ci++) {
        const plan_component *c = &p->component[ci];
        *out++ = (uint8_t)c->id;
        *out++ = (uint8_t)(c->h << 4 | c->v);
        *out++ = (uint8_t)c->quant;
    }
    *out++ = 0xFF;
    *out++ = 0xDA;
    out = put16(out, (unsigned)(6 + 2 * p->components));
    *out++ = (uint8_t)p->components;
    for (int ci = 0; ci < p->components; ci++) {
        *out++ = (uint8_t)p->component[ci].id;
        *out++ = (uint8_t)(p->component[ci].table << 4 | p->component[ci].table);
    }
    *out++ = 0;
    *out++ = 63;
    *out++ = 0;
    p->header_length = (size_t)(out - p->header);
}

int transcode_plan_make(j_decompress_ptr cinfo, uint32_t tile_size, transcode_plan *p, char *reason,
                        size_t capacity) {
    memset(p, 0, sizeof *p);
    p->width = cinfo->image_width;
    p->height = cinfo->image_height;
    p->tile_size = tile_size;
    p->orientation = 1;
    p->imcu_rows = cinfo->total_iMCU_rows;
    if (cinfo->data_precision != 8) return refuse(reason, capacity, "it is not an 8-bit JPEG");
    if (tile_size < 16 || tile_size % 16) return refuse(reason, capacity, "the tile size is not a multiple of 16");
    if (cinfo->num_components == 1 && cinfo->jpeg_color_space == JCS_GRAYSCALE) {
        p->components = 1;
        p->photometric = CJS_PHOTOMETRIC_GRAY;
    } else if (cinfo->num_components == 3 && cinfo->jpeg_color_space == JCS_YCbCr) {
        p->components = 3;
        p->photometric = CJS_PHOTOMETRIC_YCBCR;
    } else {
        return refuse(reason, capacity, "it is neither YCbCr nor grayscale");
    }
    if (sampling(cinfo, p, reason, capacity) || quantisation(cinfo, p, reason, capacity)) return -1;
    for (int ci = 0; ci < p->components; ci++) {
        const jpeg_component_info *info = &cinfo->comp_info[ci];
        plan_component *c = &p->component[ci];
        c->id = ci + 1;
        c->table = ci == 0 ? 0 : 1;
        c->blocks_per_row = (info->width_in_blocks + (JDIMENSION)info->h_samp_factor - 1) /
                            (JDIMENSION)info->h_samp_factor * (JDIMENSION)info->h_samp_factor;
        c->block_rows = info->height_in_blocks;
        c->blocks_wide = info->width_in_blocks;
    }
    p->source_tables = 1;
    if (huffman_tables(cinfo, p) || write_tables(p)) {
        transcode_plan_free(p);
        return refuse(reason, capacity, "out of memory");
    }
    write_header(p);
    return 0;
}

plan_turn plan_turn_of(int orientation) {
    switch (orientation) {
    case 2: return (plan_turn){.flip_x = 1};
    case 3: return (plan_turn){.flip_x = 1, .flip_y = 1};
    case 4: return (plan_turn){.flip_y = 1};
    case 5: return (plan_turn){.transpose = 1};
    case 6: return (plan_turn){.transpose = 1, .flip_y = 1};
    case 7: return (plan_turn){.transpose = 1, .flip_x = 1, .flip_y = 1};
    case 8: return (plan_turn){.transpose = 1, .flip_x = 1};
    default: return (plan_turn){0};
    }
}

int transcode_plan_turn(const transcode_plan *s, int orientation, transcode_plan *t, char *reason,
                        size_t capacity) {
    memset(t, 0, sizeof *t);
    plan_turn turn = plan_turn_of(orientation);
    /* A flipped side's last block of every component must end at the image's edge: it becomes the
       first, at the tile's origin. */
    for (int ci = 0; ci < s->components; ci++) {
        const plan_component *c = &s->component[ci];
        char text[96];
        if (turn.flip_x && (uint64_t)s->width * (uint64_t)c->h % (8u * (unsigned)s->max_h)) {
            snprintf(text, sizeof text, "its width is not a whole number of %d-pixel MCUs", 8 * s->max_h);
            return refuse(reason, capacity, text);
        }
        /* Flipped rows: whole iMCU rows too (8 x the source's largest vertical factor), so that the
           bands of rows the tiles are coded from end where the image does (turned_level.h). */
        if (turn.flip_y && (uint64_t)s->height % (8u * (unsigned)(s->max_v * s->sub_rows))) {
            snprintf(text, sizeof text, "its height is not a whole number of %d-pixel MCUs", 8 * s->max_v * s->sub_rows);
            return refuse(reason, capacity, text);
        }
    }
    /* An upright tile is a band of whole stored iMCU rows (turned_level.h). */
    if (s->tile_size % (8u * (unsigned)s->max_v * (unsigned)s->sub_rows))
        return refuse(reason, capacity, "its MCU rows do not divide the tile size");
    *t = *s;
    t->tables = NULL;
    t->orientation = orientation;
    if (turn.transpose) {
        t->width = s->height;
        t->height = s->width;
        t->max_h = s->max_v;
        t->max_v = s->max_h;
        for (int ci = 0; ci < s->components; ci++) {
            t->component[ci].h = s->component[ci].v;
            t->component[ci].v = s->component[ci].h;
            t->component[ci].blocks_wide = s->component[ci].block_rows;
            t->component[ci].block_rows = s->component[ci].blocks_wide;
        }
        if (t->components == 3 && t->component[0].v > t->component[0].h)
            return refuse(reason, capacity, "its sampling turned is not one TIFF can state");
        for (int slot = 0; slot < NUM_QUANT_TBLS; slot++)
            for (int k = 0; k < DCTSIZE2; k++) t->quant[slot][k] = s->quant[slot][(k % 8) * 8 + k / 8];
    }
    if (write_tables(t)) return refuse(reason, capacity, "out of memory");
    write_header(t);
    return 0;
}

void transcode_plan_free(transcode_plan *p) {
    free(p->tables);
    p->tables = NULL;
}
