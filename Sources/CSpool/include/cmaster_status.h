/* cmaster_status.h: the one status convention of the master decoders (PNG, TIFF, JPEG 2000). Every
 * call that can fail returns a cmaster_status; a failure's text is had from the decoder's
 * copy_message and an I/O failure's errno from its error_number. TileCore turns a status into a
 * TileError in one place (MasterStatus.swift). */
#ifndef CMASTER_STATUS_H
#define CMASTER_STATUS_H

typedef enum {
    CMASTER_OK = 0,
    CMASTER_NEED_DATA = 1,          /* more bytes (or the end of the input) are needed before the call can go on */
    CMASTER_DONE = 2,               /* every row has been given (and, for a PNG, its end read) */
    CMASTER_ERR_CORRUPT = -1,       /* the library refused the data (corrupt, not this format); see the message */
    CMASTER_ERR_NOMEM = -2,
    CMASTER_ERR_UNSUPPORTED = -3,   /* an image this decoder does not read; the message says what */
    CMASTER_ERR_TRUNCATED = -4,     /* the input ended before the image did */
    CMASTER_ERR_STATE = -5,         /* called after a failure, or out of order */
    CMASTER_ERR_ARGUMENT = -6,      /* a bad argument (a path that is not a regular file, a null buffer) */
    CMASTER_ERR_IO = -7             /* a file or spool failed: errno in the decoder's error_number */
} cmaster_status;

#endif
