/* OpenSSL's libcrypto (Debian's libssl-dev): the digests S3's request signatures and multipart entity
   tags need (SHA-256, HMAC-SHA-256, MD5), through EVP. The system's library, kept up to date by the
   distribution, instead of a second BoringSSL compiled into every build. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
