/* th_cubin.c — what a CUBIN says about its kernels, read on the host without a GPU: a CUBIN is an ELF64 image
 * whose symbol table holds each kernel as a global function, and whose `.nv.info.<kernel>` section lists the
 * kernel's parameters (EIATTR_KPARAM_INFO records: ordinal, offset, size). So the launch plan's argument lists
 * are checked against the compiled kernels before anything is launched, here and in CI. Every read is bounds-
 * checked: a damaged image is "cannot read", never a crash. */
#include <stdio.h>
#include <string.h>

#include "th_cuda_plan.h"
#include "khost/kit/status.h"

typedef struct elf {
    const unsigned char *p;
    size_t len;
    uint64_t shoff;
    uint16_t shentsize, shnum, shstrndx;
} elf;

static int rd(const elf *e, uint64_t at, void *dst, size_t n) {
    if (at > e->len || n > e->len - at) return 0;
    memcpy(dst, e->p + at, n);
    return 1;
}

static uint32_t u32(const unsigned char *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }
static uint16_t u16(const unsigned char *b) { return (uint16_t)(b[0] | b[1] << 8); }
static uint64_t u64(const unsigned char *b) { return (uint64_t)u32(b) | (uint64_t)u32(b + 4) << 32; }

static int open_elf(elf *e, const void *img, size_t len) {
    memset(e, 0, sizeof *e);
    e->p = img;
    e->len = len;
    unsigned char h[64];
    if (!img || !rd(e, 0, h, sizeof h) || memcmp(h, "\177ELF", 4) != 0 || h[4] != 2 || h[5] != 1) return 0;
    e->shoff = u64(h + 0x28);
    e->shentsize = u16(h + 0x3a);
    e->shnum = u16(h + 0x3c);
    e->shstrndx = u16(h + 0x3e);
    return e->shentsize >= 64 && e->shstrndx < e->shnum;
}

typedef struct shdr {
    uint32_t name, type, link;
    uint64_t offset, size, entsize;
} shdr;

static int section(const elf *e, uint32_t k, shdr *s) {
    unsigned char b[64];
    if (k >= e->shnum || !rd(e, e->shoff + (uint64_t)k * e->shentsize, b, sizeof b)) return 0;
    s->name = u32(b);
    s->type = u32(b + 4);
    s->offset = u64(b + 24);
    s->size = u64(b + 32);
    s->link = u32(b + 40);
    s->entsize = u64(b + 56);
    return s->offset <= e->len && s->size <= e->len - s->offset;
}

/* 1 when the NUL-terminated string at strtab section `tab` + off equals name */
static int name_is(const elf *e, uint32_t tab, uint32_t off, const char *name) {
    shdr t;
    if (!section(e, tab, &t) || off >= t.size) return 0;
    size_t n = strlen(name);
    if (n >= t.size - off) return 0;
    const char *s = (const char *)e->p + t.offset + off;
    return memcmp(s, name, n) == 0 && s[n] == 0;
}

int th_cubin_has_kernel(const void *cubin, size_t len, const char *name) {
    elf e;
    if (!open_elf(&e, cubin, len)) return 0;
    for (uint32_t k = 0; k < e.shnum; k++) {
        shdr s;
        if (!section(&e, k, &s) || s.type != 2 /* SHT_SYMTAB */ || s.entsize < 24) continue;
        for (uint64_t j = 0; j < s.size / s.entsize; j++) {
            unsigned char b[24];
            if (!rd(&e, s.offset + j * s.entsize, b, sizeof b)) break;
            unsigned info = b[4];
            if ((info & 0xf) == 2 /* STT_FUNC */ && (info >> 4) == 1 /* STB_GLOBAL */ && u16(b + 6) != 0 &&
                name_is(&e, s.link, u32(b), name))
                return 1;
        }
    }
    return 0;
}

#define EIATTR_KPARAM_INFO 0x17

int th_cubin_params(const void *cubin, size_t len, const char *name, int max, int32_t *offset, int32_t *size) {
    elf e;
    if (!open_elf(&e, cubin, len)) return -1;
    char want[TH_CU_NAME + 16];
    snprintf(want, sizeof want, ".nv.info.%s", name);
    for (uint32_t k = 0; k < e.shnum; k++) {
        shdr s;
        if (!section(&e, k, &s) || !name_is(&e, e.shstrndx, s.name, want)) continue;
        /* records: format (1 NVAL, 2 BVAL, 3 HVAL: 2-byte value inline; 4 SVAL: 2-byte size, then the data),
         * attribute, then the value */
        int count = 0;
        uint64_t at = s.offset, end = s.offset + s.size;
        while (at + 4 <= end) {
            unsigned char h[4];
            if (!rd(&e, at, h, 4)) return -1;
            uint32_t fmt = h[0], attr = h[1], sz = u16(h + 2);
            if (fmt != 4) {
                if (fmt < 1 || fmt > 3) return -1;
                at += 4;
                continue;
            }
            if (at + 4 + sz > end) return -1;
            if (attr == EIATTR_KPARAM_INFO && sz >= 12) {
                unsigned char d[12];
                if (!rd(&e, at + 4, d, sizeof d)) return -1;
                int ord = u16(d + 4);
                if (ord < 0 || ord >= max) return -1;
                offset[ord] = u16(d + 6);
                size[ord] = (int32_t)((u32(d + 8) >> 18) & 0x3fff);
                if (ord + 1 > count) count = ord + 1;
            }
            at += 4 + sz;
        }
        return count;
    }
    return -1;
}

kh_status th_cubin_check_plan(const void *cubin, size_t len, const th_cu_plan *plan, char *err, size_t errlen) {
    for (int32_t k = 0; k < plan->n; k++) {
        const th_cu_launch *e = &plan->v[k];
        if (e->kind != TH_CUL_KERNEL) continue;
        if (!th_cubin_has_kernel(cubin, len, e->name))
            return kh_errf(err, errlen, KH_ERR_INTERNAL, "kernel %s (node %d) is not in the CUBIN", e->name, e->node);
        int32_t off[TH_CU_MAX_ARGS + 1], sz[TH_CU_MAX_ARGS + 1];
        int np = th_cubin_params(cubin, len, e->name, TH_CU_MAX_ARGS + 1, off, sz);
        if (np != e->n_args)
            return kh_errf(err, errlen, KH_ERR_INTERNAL, "kernel %s: %d parameters in the CUBIN, %d in the launch plan",
                           e->name, np, e->n_args);
        int64_t at = 0;
        for (int j = 0; j < np; j++) {
            int64_t s = (int64_t)th_cu_arg_size(e->args[j].kind);
            at = (at + s - 1) / s * s;
            if (off[j] != at || sz[j] != s)
                return kh_errf(err, errlen, KH_ERR_INTERNAL,
                               "kernel %s: parameter %d at %d (%d bytes) in the CUBIN, at %lld (%lld bytes) in the plan",
                               e->name, j, off[j], sz[j], (long long)at, (long long)s);
            at += s;
        }
    }
    return KH_OK;
}
