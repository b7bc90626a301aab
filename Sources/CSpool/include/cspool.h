/* cspool.h: anonymous spool files, for the masters read out of order (a TIFF's directory, a JPEG 2000's
 * tiles, an interlaced PNG's passes). The one place that makes them. This target also holds the master
 * decoders' shared status convention (cmaster_status.h). */
#ifndef CSPOOL_H
#define CSPOOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** An anonymous file in `directory` for the caller to own: O_TMPFILE where the file system has it,
    else a file made and unlinked at once. The descriptor (close-on-exec), or -1 with errno set. */
int32_t cspool_create(const char *directory);

#ifdef __cplusplus
}
#endif
#endif
