/*
 * libFuzzer target for the TIFF reader (issue 26), driven as TiledImage drives it: the input is a
 * file (a memfd) opened with cjs_tiff_reader_open; then, for each tiled directory, up to 16 tiles are
 * located and decoded: JPEG tiles with cjs_jpeg_tile_decode (the directory's JPEGTables spliced in,
 * the tile's bytes as the file holds them) and cropped with cjs_jpeg_tile_crop, WebP tiles with
 * cjs_webp_tile_decode (libwebp, the tile's bytes), the others through libtiff (cjs_tiff_reader_decode).
 * Tiles are limited to 1024 pixels a side so that the fuzzer explores rather than allocates.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cjpeg_shim.h"

static void read_tiles(cjs_tiff_reader *r, uint32_t index, const uint8_t *data, size_t size) {
    cjs_tiff_directory d;
    if (cjs_tiff_reader_directory(r, index, &d) != CJS_OK) abort();
    if (d.tile_width == 0 || d.tile_height == 0 || d.tile_width > 1024 || d.tile_height > 1024) return;
    size_t stride = (size_t)d.tile_width * 4;
    uint8_t *rgba = malloc(stride * d.tile_height);
    if (!rgba) return;
    char message[256];
    int tiles = 0;
    for (uint32_t row = 0; row < d.rows && tiles < 16; row++)
        for (uint32_t column = 0; column < d.columns && tiles < 16; column++, tiles++) {
            uint64_t offset, length;
            if (cjs_tiff_reader_locate(r, index, column, row, &offset, &length) != CJS_OK) abort();
            if (d.compression == CJS_COMPRESSION_WEBP) {
                if (length > 0 && length <= (1u << 20) && offset <= size && length <= size - offset)
                    cjs_webp_tile_decode(data + offset, (size_t)length, d.tile_width, d.tile_height, rgba, stride, message,
                                         sizeof message);
            } else if (d.compression != CJS_COMPRESSION_JPEG) {
                cjs_tiff_reader_decode(r, index, column, row, rgba, stride, message, sizeof message);
            } else if (length > 0 && length <= (1u << 20) && offset <= size && length <= size - offset) {
                cjs_jpeg_tile_decode(d.jpeg_tables, d.jpeg_tables_length, data + offset, (size_t)length, d.photometric,
                                     d.tile_width, d.tile_height, rgba, stride, message, sizeof message);
                /* An edge tile's crop, as a server makes it (half the tile, at least a pixel). */
                void *cropped = NULL;
                size_t cropped_length = 0;
                if (cjs_jpeg_tile_crop(d.jpeg_tables, d.jpeg_tables_length, data + offset, (size_t)length, d.tile_width,
                                       d.tile_height, d.tile_width / 2 + 1, d.tile_height / 2 + 1, &cropped,
                                       &cropped_length, message, sizeof message) == CJS_OK)
                    cjs_free(cropped);
            }
        }
    free(rgba);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("tiff", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (size > 0 && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char message[256];
    cjs_tiff_reader *r = NULL;
    if (cjs_tiff_reader_open(fd, 1u << 16, &r, message, sizeof message) == CJS_OK) {
        uint32_t count = cjs_tiff_reader_directory_count(r);
        for (uint32_t i = 0; i < count; i++) read_tiles(r, i, data, size);
        cjs_tiff_reader_destroy(r);
    }
    close(fd);
    return 0;
}
