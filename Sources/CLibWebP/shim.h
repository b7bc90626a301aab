/* libwebp and libwebpmux (Debian's libwebp-dev): WebP answers, with their colour profiles. */
#include <webp/encode.h>
#include <webp/mux.h>
