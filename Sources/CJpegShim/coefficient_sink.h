/*
 * coefficient_sink.h: where a JPEG's final DCT coefficients go, one iMCU row at a time, in order.
 *
 * The sink owns a ring of iMCU rows (every component's block rows of one row of MCUs). The
 * coefficient store (coefficients.c) either copies each row the output pass reads into the ring, or,
 * for a single-scan image whose output follows its input (coefficient_stream.c), lets libjpeg decode
 * straight into the ring. A row is committed once the output pass has moved past it: the sink may
 * then read it (the transcoder entropy-codes it into level 0's tiles) and reuse its room. The sink
 * never calls back into the store or libjpeg.
 */
#ifndef CJS_COEFFICIENT_SINK_H
#define CJS_COEFFICIENT_SINK_H

#include <stdio.h>
#include <jpeglib.h>

typedef struct {
    /*
     * Component `component`'s block rows of iMCU row `row` (its v_samp_factor rows, each at least as
     * wide as libjpeg's array), in the ring: all zero when handed out for a new row, valid until the
     * row is committed. Blocks while the ring has no room. NULL when the sink has failed or is
     * stopping; *error_number then says why.
     */
    JBLOCKARRAY (*rows)(void *context, int component, JDIMENSION row, int *error_number);
    /* iMCU rows below `end` are final. 0, or the errno of the sink's failure. */
    int (*commit)(void *context, JDIMENSION end);
    void *context;
} coefficient_sink;

#endif
