/* libpng (Debian's libpng-dev): the shim's PNG encoder is its only user. */
#include <png.h>
