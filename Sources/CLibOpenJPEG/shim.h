/* OpenJPEG (Debian's libopenjp2-7-dev): JPEG 2000 masters. */
#include <openjpeg.h>
