/* libtiff (Debian's libtiff-dev): the container of tiled pyramidal TIFFs. */
#include <tiffio.h>
