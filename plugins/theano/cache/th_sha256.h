/* plugins/theano/cache/th_sha256.h — SHA-256 (libmd) as lowercase hex, of a buffer or of an open file. */
#ifndef TH_SHA256_H
#define TH_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define TH_SHA256_HEX_LEN 64

/* hex receives 64 lowercase hex digits and a NUL. */
void th_sha256_hex(const void *data, size_t n, char hex[TH_SHA256_HEX_LEN + 1]);

/* Hashes fd from offset 0 to EOF (pread: the file offset is not moved); *size = bytes read.
 * Returns 0, or -1 with errno set (a read error). */
int th_sha256_fd_hex(int fd, char hex[TH_SHA256_HEX_LEN + 1], uint64_t *size);

#endif
