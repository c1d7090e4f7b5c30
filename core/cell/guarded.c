/* core/cell/guarded.c — buffers that end at a guard page (guarded.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "cell/guarded.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Before the buffer, in the mapping's first bytes: where the mapping starts and how long it is. */
typedef struct guarded_head {
    void *base;
    size_t len;
} guarded_head;

void *kh_guarded_alloc(size_t n) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + 63) & ~(size_t)63;
    if (body < n || body > SIZE_MAX - 3 * page) return NULL;
    size_t data_pages = (body + sizeof(guarded_head) + page - 1) / page, len = (data_pages + 1) * page;
    unsigned char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    unsigned char *guard = base + data_pages * page;
    if (mprotect(guard, page, PROT_NONE) != 0) {
        munmap(base, len);
        return NULL;
    }
    unsigned char *p = guard - body;
    guarded_head h = {base, len};
    memcpy(p - sizeof h, &h, sizeof h);
    return p;
}

void kh_guarded_free(void *p) {
    if (!p) return;
    guarded_head h;
    memcpy(&h, (unsigned char *)p - sizeof h, sizeof h);
    munmap(h.base, h.len);
}
