/* tests/backend/bench_specs.h — the six benchmark models as the tests use them: the task modules' own
 * definitions (tasks/common_models/bench_models.h) at the full data sets' sizes, without loading any data. */
#ifndef KHOST_TESTS_BENCH_SPECS_H
#define KHOST_TESTS_BENCH_SPECS_H

#include "khost/model.h"

typedef struct kb_model {
    const char *name;
    kh_model_spec spec;
    int batch; /* the task's batch size */
} kb_model;

/* The six models, in the benchmark's order; returns their number (6). */
int kb_bench_models(const kb_model **out);

#endif
