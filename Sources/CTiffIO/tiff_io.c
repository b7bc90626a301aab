/* tiff_io.c: libtiff's client procedures and message handlers over a caller's descriptor (ctiff_io.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctiff_io.h"

static tmsize_t proc_read(thandle_t h, void *buffer, tmsize_t size) {
    tiff_file *f = h;
    ssize_t n;
    if (f->read_at) {
        n = f->read_at(f->context, f->position, buffer, size);
        if (n > 0) f->position += (uint64_t)n;
        return n;
    }
    do n = pread(f->fd, buffer, (size_t)size, (off_t)f->position);
    while (n < 0 && errno == EINTR);
    if (n > 0) f->position += (uint64_t)n;
    return n;
}

static tmsize_t proc_write(thandle_t h, void *buffer, tmsize_t size) {
    tiff_file *f = h;
    const char *p = buffer;
    size_t left = (size_t)size;
    if (f->read_at) return -1; /* read-only */
    while (left > 0) {
        ssize_t n = pwrite(f->fd, p, left, (off_t)f->position);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (!f->error_number) f->error_number = n < 0 ? errno : ENOSPC;
            return -1;
        }
        p += n;
        left -= (size_t)n;
        f->position += (uint64_t)n;
    }
    return size;
}

static toff_t proc_seek(thandle_t h, toff_t offset, int whence) {
    tiff_file *f = h;
    struct stat info;
    switch (whence) {
    case SEEK_SET: f->position = offset; break;
    case SEEK_CUR: f->position += offset; break;
    case SEEK_END:
        if (f->read_at) {
            f->position = f->size + offset;
            break;
        }
        if (fstat(f->fd, &info) != 0) return (toff_t)-1;
        f->position = (uint64_t)info.st_size + offset;
        break;
    default: return (toff_t)-1;
    }
    return f->position;
}

static int proc_close(thandle_t h) {
    (void)h; /* the descriptor is the caller's */
    return 0;
}

static toff_t proc_size(thandle_t h) {
    tiff_file *f = h;
    struct stat info;
    if (f->read_at) return f->size;
    return fstat(f->fd, &info) == 0 ? (toff_t)info.st_size : 0;
}

static int proc_map(thandle_t h, void **base, toff_t *size) {
    (void)h, (void)base, (void)size;
    return 0;
}

static void proc_unmap(thandle_t h, void *base, toff_t size) { (void)h, (void)base, (void)size; }

/* The first error is kept; returning 1 keeps libtiff's global handler (which prints) from running. */
static int on_error(TIFF *tif, void *context, const char *module, const char *format, va_list arguments) {
    (void)tif;
    tiff_file *f = context;
    if (!f->message[0]) {
        int n = snprintf(f->message, sizeof f->message, "%s: ", module ? module : "libtiff");
        if (n >= 0 && (size_t)n < sizeof f->message)
            vsnprintf(f->message + n, sizeof f->message - (size_t)n, format, arguments);
    }
    return 1;
}

static int on_warning(TIFF *tif, void *context, const char *module, const char *format, va_list arguments) {
    (void)tif, (void)context, (void)module, (void)format, (void)arguments;
    return 1;
}

TIFF *tiff_io_open(tiff_file *file, const char *mode, tmsize_t max_allocation) {
    TIFFOpenOptions *options = TIFFOpenOptionsAlloc();
    if (!options) {
        snprintf(file->message, sizeof file->message, "out of memory");
        return NULL;
    }
    TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, file);
    TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, file);
    if (max_allocation > 0) TIFFOpenOptionsSetMaxSingleMemAlloc(options, max_allocation);
    TIFF *tif = TIFFClientOpenExt("tiff", mode, (thandle_t)file, proc_read, proc_write, proc_seek, proc_close,
                                  proc_size, proc_map, proc_unmap, options);
    TIFFOpenOptionsFree(options);
    if (!tif && !file->message[0]) snprintf(file->message, sizeof file->message, "libtiff cannot open the file");
    return tif;
}
