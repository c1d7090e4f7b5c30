/* cpu/cpu_path.c — which CPU path this build of the module has, for the caps note and the environment
 * record: oneDNN convolutions (built with CNTK_HAVE_DNNL, version from the library actually loaded, and the
 * instruction set oneDNN chose on this CPU: machines of one model name differ in it) or the OpenBLAS im2col
 * fallback. */
#include <stdio.h>

#include "cpu/cpu.h"

#ifdef CNTK_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

const char *cntk_cpu_path(char *buf, size_t n) {
    const dnnl_version_t *v = dnnl_version();
    snprintf(buf, n, "onednn-%d.%d.%d", v->major, v->minor, v->patch);
    return buf;
}

int cntk_cpu_onednn(void) { return 1; }

const char *cntk_onednn_isa(void) {
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: break;
    }
    static char other[24]; /* a level this header does not name: its number, as oneDNN's enum gives it */
    snprintf(other, sizeof other, "isa_0x%x", (unsigned)dnnl_get_effective_cpu_isa());
    return other;
}

const char *cntk_cpu_note(char *buf, size_t n) {
    char ver[32];
    snprintf(buf, n,
             "OpenBLAS GEMM, %s convolution (blocked layouts, kept between chained ones; with it Dense and "
             "activations on oneDNN), NCHW elsewhere",
             cntk_cpu_path(ver, sizeof ver));
    return buf;
}

#else

int cntk_cpu_onednn(void) { return 0; }

const char *cntk_onednn_isa(void) { return NULL; }

const char *cntk_cpu_path(char *buf, size_t n) {
    snprintf(buf, n, "openblas-im2col");
    return buf;
}

const char *cntk_cpu_note(char *buf, size_t n) {
    snprintf(buf, n, "OpenBLAS GEMM, im2col convolution, NCHW");
    return buf;
}

#endif
