/* libpng (Debian's libpng-dev): the shim's PNG encoder and CPngDecoder's reader. */
#include <png.h>
