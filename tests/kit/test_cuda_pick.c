/* tests/kit/test_cuda_pick.c — the plain-C half of the kit's CUDA helper (khost/kit/cuda_pick.h), no GPU needed:
 * the algorithm choice (deterministic first; the fastest usable one as a flagged fallback; none usable), the
 * candidate list of the error message, the record's cudnn_algos string (cut with "..." when full), a driver
 * error's text and the compute-capability check. */
#include <string.h>

#include "khost/kit/cuda_pick.h"
#include "testutil.h"

int main(void) {
    /* ranked fastest first: 7 is fastest but refused, 1 non-deterministic, 0 deterministic */
    kh_algo_cand c[3] = {{.algo = 7, .ok = 0, .det = 1, .memory = 1u << 30},
                         {.algo = 1, .ok = 1, .det = 0, .memory = 4096},
                         {.algo = 0, .ok = 1, .det = 1, .memory = 0}};
    int fb = -1;
    CHECK(kh_algo_pick(c, 3, 1, &fb) == 2 && fb == 0, "deterministic wanted: the first usable deterministic (fb %d)", fb);
    CHECK(kh_algo_pick(c, 3, 0, &fb) == 1 && fb == 0, "deterministic not wanted: the fastest usable (fb %d)", fb);
    c[2].det = 0;
    CHECK(kh_algo_pick(c, 3, 1, &fb) == 1 && fb == 1, "no deterministic usable: the fastest, flagged (fb %d)", fb);
    c[1].ok = c[2].ok = 0;
    CHECK(kh_algo_pick(c, 3, 1, &fb) == -1 && fb == 0, "none usable: -1");
    CHECK(kh_algo_pick(c, 0, 1, NULL) == -1, "no candidates: -1");

    char list[128];
    kh_algo_list(c, 2, list, sizeof list);
    CHECK(!strcmp(list, "7(deterministic, refused, 1073741824 B) 1(non-deterministic, refused, 4096 B)"), "list: %s", list);
    kh_algo_list(c, 0, list, sizeof list);
    CHECK(!strcmp(list, "none"), "empty list: %s", list);

    char rec[32] = "";
    kh_algo_record(rec, sizeof rec, 0, "fwd", 1, 1);
    kh_algo_record(rec, sizeof rec, 0, "bwd_filter", 3, 0);
    CHECK(!strcmp(rec, "L0.fwd=1 L0.bwd_filter=3~"), "record: %s", rec);
    kh_algo_record(rec, sizeof rec, 12, "bwd_data", 5, 1); /* does not fit in 32 bytes */
    CHECK(strlen(rec) == sizeof rec - 1 && !strcmp(rec + sizeof rec - 4, "..."), "record cut: %s", rec);
    kh_algo_record(rec, sizeof rec, 1, "fwd", 0, 1);
    CHECK(!strcmp(rec + sizeof rec - 4, "...") && strlen(rec) == sizeof rec - 1, "a full record stays cut: %s", rec);

    char t[96];
    CHECK(!strcmp(kh_cu_errtext(2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory", t, sizeof t),
                  "CUDA_ERROR_OUT_OF_MEMORY: out of memory"), "driver error: %s", t);
    CHECK(!strcmp(kh_cu_errtext(999, NULL, NULL, t, sizeof t), "CUDA error 999"), "unnamed driver error: %s", t);
    CHECK(!strcmp(kh_call_name("cudnnConvolutionForward(m->cs->k.dnn, a)", t, sizeof t), "cudnnConvolutionForward"),
          "call name before '(' (a '.' inside the arguments is not the name's): %s", t);
    CHECK(!strcmp(kh_call_name("kh_cu.LaunchKernel(f, g.x)", t, sizeof t), "LaunchKernel"), "table call: %s", t);
    CHECK(!strcmp(kh_call_name("plain", t, sizeof t), "plain"), "no parenthesis: %s", t);
    CHECK(kh_cuda_arch_check(9, 0, 90, "p", "cuda:0", t, sizeof t) == KH_OK, "sm_90 on 9.0");
    CHECK(kh_cuda_arch_check(8, 6, 90, "p", "cuda:1", t, sizeof t) == KH_ERR_UNSUPPORTED &&
              !strcmp(t, "p open on cuda:1: compute capability 8.6, built for sm_90 and newer (set KHOST_CUDA_ARCHS)"),
          "8.6 refused: %s", t);
    return kh_test_finish("test_cuda_pick");
}
