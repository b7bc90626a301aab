/*
 * cjpeg_shim.h: the C side of TiledImageKit, all of it (Swift sees every header in this folder).
 *
 * Thin, hand-written C over libjpeg-turbo's libjpeg API (Debian's libjpeg62-turbo) and libtiff:
 *  - cjs_decoder (cjs_decoder.h): a push decoder over a suspending source manager (bytes in, RGBX rows
 *    out), which can also hand a JPEG's DCT coefficients to a transcoder (cjs_tiff.h),
 *  - cjs_pyramid (cjs_pyramid.h): levels, the 2x2 shrink chain and the worker thread, over one level
 *    writer per level (the band writer, the two-tile-row window writer, or JPEG tiles of a TIFF),
 *  - cjs_export (cjs_export.h): DeepZoom and IIIF tiles straight from the rows,
 *  - cjs_encoder (cjs_encoder.h): in-memory encoders used by tests, the demo, resized copies and tiles,
 *  - cjs_tiff_writer, cjs_tiff_reader (cjs_tiff.h): tiled pyramidal (Big)TIFFs through libtiff.
 * Conventions (cjs_common.h): statuses, out-parameters, a setjmp in every function that calls
 * libjpeg, poisoned handles after errors, no globals, no printing.
 */
#ifndef CJPEG_SHIM_H
#define CJPEG_SHIM_H

#include "cjs_common.h"
#include "cjs_decoder.h"
#include "cjs_encoder.h"
#include "cjs_export.h"
#include "cjs_pyramid.h"
#include "cjs_tiff.h"

#endif
