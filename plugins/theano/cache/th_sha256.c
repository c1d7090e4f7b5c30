/* plugins/theano/cache/th_sha256.c — SHA-256 through libmd (Debian's libmd-dev: sha2.h). */
#define _POSIX_C_SOURCE 200809L
#include "th_sha256.h"

#include <errno.h>
#include <sha2.h>
#include <sys/types.h>
#include <unistd.h>

static void to_hex(const uint8_t d[SHA256_DIGEST_LENGTH], char hex[TH_SHA256_HEX_LEN + 1]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        hex[2 * i] = digits[d[i] >> 4];
        hex[2 * i + 1] = digits[d[i] & 15];
    }
    hex[TH_SHA256_HEX_LEN] = 0;
}

void th_sha256_hex(const void *data, size_t n, char hex[TH_SHA256_HEX_LEN + 1]) {
    SHA2_CTX ctx;
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256Init(&ctx);
    SHA256Update(&ctx, data, n);
    SHA256Final(d, &ctx);
    to_hex(d, hex);
}

int th_sha256_fd_hex(int fd, char hex[TH_SHA256_HEX_LEN + 1], uint64_t *size) {
    SHA2_CTX ctx;
    uint8_t d[SHA256_DIGEST_LENGTH];
    unsigned char buf[65536];
    uint64_t total = 0;
    SHA256Init(&ctx);
    for (;;) {
        ssize_t got = pread(fd, buf, sizeof buf, (off_t)total);
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (got == 0) break;
        SHA256Update(&ctx, buf, (size_t)got);
        total += (uint64_t)got;
    }
    SHA256Final(d, &ctx);
    to_hex(d, hex);
    if (size) *size = total;
    return 0;
}
