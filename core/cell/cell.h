/* core/cell/cell.h — run one plugin x task x device cell: the host-side training loop, identical for every
 * backend (the time-per-epoch rule of README.md and docs/ARCHITECTURE.md, "Data flow of one cell"). */
#ifndef KHOST_CORE_CELL_H
#define KHOST_CORE_CELL_H

#include <stdint.h>
#include <stdio.h>

#include "devices/devices.h"
#include "modules/loader.h"
#include "results/results.h"

typedef struct kh_cell_opts {
    kh_module *backend, *task;
    kh_devices *devs;
    kh_device *dev;
    int epochs;          /* 0 = the task's */
    int batch_size;      /* 0 = the task's */
    uint64_t seed;
    uint32_t math;       /* kh_math_mode asked (--math; KH_MATH_FP32 by default): kh_math_effective decides */
    int64_t limit_train, limit_val;
    int64_t steps;        /* > 0: train this many batches per epoch (from the shuffled full split) */
    int64_t warmup_steps; /* untimed training batches before epoch 1 (benchmarks: allocator, caches, JIT) */
    const char *data_dir;
    int quiet;
    FILE *out;           /* progress and text output */
    const char *checkpoint_dir; /* non-NULL: rewrite the record (status "running") after every epoch, so a
                                   killed or crashed cell keeps the epochs it finished */
} kh_cell_opts;

/* Runs the cell and fills rec (status, reason, rows, environment). Returns a KH_EXIT_ code. Never exits;
 * every failure after the modules are known becomes rec->status. */
int kh_cell_run(const kh_cell_opts *o, kh_cell_record *rec);

/* 1 when backend b reports device_kind unavailable (why: "unsupported: device kind not available: ..."),
 * else 0: asked before a cell is scheduled or its data loaded, so a cell that cannot run costs nothing. */
int kh_cell_device_unavailable(const kh_backend_api *b, uint32_t device_kind, char *why, size_t n);

/* Weights for a compiled model from the run's seed (Keras initialisers, canonical layouts). */
int kh_cell_init_weights(const kh_backend_api *b, kh_bsession *s, kh_bmodel *m, const kh_model_spec *spec,
                         uint64_t seed, char *err, size_t errlen);
#endif
