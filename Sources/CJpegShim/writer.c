/* writer.c: what every level writer shares: the lock, failures, space reservation, progress. */
#include <errno.h>
#include <fcntl.h>

#include "writer.h"

void writer_lock(writer_shared *s) {
    if (s->threaded) pthread_mutex_lock(&s->lock);
}

void writer_unlock(writer_shared *s) {
    if (s->threaded) pthread_mutex_unlock(&s->lock);
}

void writer_fail_locked(writer_shared *s, int error_number) {
    if (!s->failed) s->error_number = error_number ? error_number : EIO;
    s->failed = 1;
    if (s->threaded) pthread_cond_broadcast(&s->changed);
}

cjs_status writer_fail(writer_shared *s, int error_number) {
    writer_lock(s);
    writer_fail_locked(s, error_number);
    writer_unlock(s);
    return CJS_ERR_IO;
}

cjs_status writer_reserve(writer_shared *s, int fd, off_t offset, off_t length) {
    int rc = posix_fallocate(fd, offset, length);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return writer_fail(s, rc);
    return CJS_OK; /* file systems without fallocate report a full disk at the write instead */
}

void writer_publish_progress(uint32_t *entry, uint32_t tile_rows) {
    if (entry) __atomic_store_n(entry, tile_rows, __ATOMIC_RELEASE);
}

uint32_t cjs_load_progress(const uint32_t *entry) { return __atomic_load_n(entry, __ATOMIC_ACQUIRE); }
void cjs_store_progress(uint32_t *entry, uint32_t value) { __atomic_store_n(entry, value, __ATOMIC_RELEASE); }
