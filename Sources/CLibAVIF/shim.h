/* libavif (Debian's libavif-dev, with its aom encoder): AVIF answers. */
#include <avif/avif.h>
