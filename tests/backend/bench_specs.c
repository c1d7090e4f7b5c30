/* tests/backend/bench_specs.c — see bench_specs.h. */
#include "bench_specs.h"

#include "bench_models.h"

int kb_bench_models(const kb_model **out) {
    static kh_bench_model def[KH_BENCH_N_MODELS];
    static kb_model m[KH_BENCH_N_MODELS];
    static int n;
    if (!n)
        for (int i = 0; i < KH_BENCH_N_MODELS; i++) {
            if (kh_bench_model_get(kh_bench_model_names[i], 0, &def[n]) != KH_OK) continue;
            m[n] = (kb_model){def[n].spec.name, def[n].spec, def[n].batch_size};
            n++;
        }
    *out = m;
    return n;
}
