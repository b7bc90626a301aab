/*
 * read_if_cached.c: a read that never waits for the disk (cjs_common.h), for event loops that serve
 * stored tiles: glibc declares preadv2 only under _GNU_SOURCE, which Swift's Glibc module lacks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/uio.h>

#include "cjs_common.h"

long cjs_read_if_cached(int fd, void *destination, size_t count, int64_t offset) {
    struct iovec vector = {.iov_base = destination, .iov_len = count};
    return (long)preadv2(fd, &vector, 1, (off_t)offset, RWF_NOWAIT);
}
