/* writer.c: what every level writer shares: the lock, failures, space reservation, progress. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* Progress entries are futex words: a store wakes the readers waiting for it (cjs_wait_progress). One
   system call per tile row published, which is thousands of rows of pixels. */
static void wake_progress(uint32_t *entry) {
    syscall(SYS_futex, entry, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void writer_publish_progress(uint32_t *entry, uint32_t tile_rows) {
    if (!entry) return;
    __atomic_store_n(entry, tile_rows, __ATOMIC_RELEASE);
    wake_progress(entry);
}

uint32_t cjs_load_progress(const uint32_t *entry) { return __atomic_load_n(entry, __ATOMIC_ACQUIRE); }

void cjs_store_progress(uint32_t *entry, uint32_t value) {
    __atomic_store_n(entry, value, __ATOMIC_RELEASE);
    wake_progress(entry);
}

void cjs_wait_progress(const uint32_t *entry, uint32_t seen, int64_t timeout_ns) {
    if (timeout_ns <= 0) return;
    struct timespec timeout = {.tv_sec = (time_t)(timeout_ns / 1000000000), .tv_nsec = (long)(timeout_ns % 1000000000)};
    /* EAGAIN (the entry moved on already), EINTR and ETIMEDOUT all mean: look again. */
    syscall(SYS_futex, entry, FUTEX_WAIT_PRIVATE, seen, &timeout, NULL, 0);
}
