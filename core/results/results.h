/* core/results/results.h — one record per plugin x task x device cell: a CSV (the original benchmark's logger
 * columns plus train_s, val_s) and a JSON record, both written atomically (temp file, fsync, rename).
 *
 * Files: <out>/<task>/<plugin>__<device>.csv and .json, where device "cuda:0" is written "cuda0"; a cell
 * repeated N > 1 times (matrix --repeat N) has one record per repetition k instead: <...>.rep<k>.json/.csv.
 * JSON record (all times in seconds):
 * {
 *   "khost_record": 2, "plugin": "cntk", "task": "mnist_mlp", "device": "cpu",   (1: before samples)
 *   "status": "ok" | "diverged" | "unsupported" | "error" | "data" | "crashed" | "timeout" | "oom",
 *             from a Slurm array also "cancelled" | "preempted" | "node_fail" | "killed" | "missing",
 *   "reason": "" | "unsupported: conv2d padding=same" | "signal 11 (Segmentation fault)" | ...,
 *   "epochs_requested": 20, "batch_size": 128, "seed": 1, "train_samples": 60000, "val_samples": 10000,
 *   "metric": "val_acc", "metric_value": 0.981,         (the task's table metric, last epoch)
 *   "mean_epoch_s": 3.2,                                (over all epochs, the seed's definition)
 *   "median_epoch_s": 3.1,                              (excluding the first epoch when > 1 epoch)
 *   "time_to_target_s": 12.3 | null,                   (elapsed at the end of the first epoch that reached the target)
 *   "flops_per_epoch": 4.5e12 | null, "bytes_per_epoch": 1.9e11 | null, (the kit's count, kh_spec_flops)
 *   "gflops": 12.1 | null,                              (flops_per_epoch / mean_epoch_s)
 *   "peak_gflops", "peak_gbps", "roofline_gflops": .. | null, "roofline_fraction": 0.31 | null,
 *   "target": {"value": 0.98, "reach": "at_least" | "at_most"} | null,  (the task's target of its metric: val_acc
 *             rises to it, loss drops to it; null: the task sets none)
 *   "epochs_to_target": 3 | null,                      (the first epoch whose metric reached the target)
 *   "target_note": "val_acc never reached its target 0.98 (at least) in 5 epochs; best 0.9731",
 *             (only where epochs_to_target is null: why). The three are absent in records written before them
 *             and in records the matrix writes for a cell that never ran: unknown, not "never reached".
 *   "peak_source": "calibrated ... cached in ~/.cache/khost/peak-cpu-levels.txt" | "published: ..." | "unknown: ...",
 *   "roofline": {"level": "L3", "gbps": 150.2, "working_set_bytes": 9.1e6,   (absent in older records: the bound
 *                "sgemm_gflops": 190.1, "fma_gflops": 231.0,                 (peak_gflops is the higher)
 *                "levels": [{"level": "L2", "bytes": 2097152, "buffer_bytes": 1048576, "gbps": 390.5, was DRAM's alone)
 *                            "kernel": "update"}, ..., {"level": "DRAM", "bytes": 0, ...}]},
 *   "math": "fp32" | "tf32",                          (the session's FP32 math: --math, kh_device.math)
 *   "math_note": "tf32 ignored on cpu: ...",          (only when the asked mode was not the one used)
 *   "compile_s": 0.002 | null,                          (host wall time of the backend's compile call)
 *   and only when the backend implements compile_info (ABI 1.2), each key absent when unknown:
 *   "compile_cache": "hit" | "miss" | "none", "compile_units": 12,
 *   "compile_codegen_s", "compile_cc_s", "compile_load_s": the backend's split of that compile,
 *   "compile_cold_s": (the first compile, when it was a miss), "compile_warm_s": (a miss: the wall time of a
 *   second compile of the same spec, made right after and served from the cache; a hit: compile_s),
 *   "epochs": [ {"epoch":1,"elapsed":3.4,"loss":..,"acc":..,"val_loss":..,"val_acc":..,
 *                "train_s":3.0,"val_s":0.4,"epoch_s":3.4}, ... ],
 *   "repeat": {"index": 1, "of": 5, "round": 1, "position": 3, "order_seed": 77},
 *   "samples": {"step_s": [0.0213, ...], "epoch_s": [3.4, ...], "step_sync": "device", "warmup_steps": 0,
 *               "steps_per_epoch": 469},        (6 significant digits; see kh_cell_record.step_s)
 *   "peak_rss_bytes": 812345344 | null,          (the cell process's peak resident set)
 *   "device_mem": {"peak_bytes": 123456 | null, "source": "backend" | "unavailable", "reason": .. (what the
 *                  backend's count covers, or why there is none), "free_before", "free_after"},
 *   "energy": {"source": "nvml"|"rapl"|"unavailable", "reason", "domain", "epoch_j": [..], "epoch_w": [..]},
 *   "environment": { "khost_version", "git_rev", "plugin_version", "task_version", "device_name",
 *                    "device_pci_bus_id", "compute_capability", "device_memory_bytes", "driver_version",
 *                    "backend_env" (the plugin's key=value string), "cpu_model", "cpu_threads",
 *                    "hostname", "dataset", "data_dir", "dataset_bytes", "started_at", "finished_at",
 *                    inside a Slurm job: "slurm_job_id", "slurm_array_job_id", "slurm_array_task_id",
 *                    "slurm_node" }
 * }
 */
#ifndef KHOST_CORE_RESULTS_H
#define KHOST_CORE_RESULTS_H

#include <stddef.h>
#include <stdint.h>

#include "devices/membw.h"

typedef struct kh_epoch_row {
    int epoch;
    double elapsed;   /* since the start of training (seconds) */
    double loss, acc, val_loss, val_acc; /* NAN when absent (no validation split) */
    double train_s, val_s, epoch_s;
} kh_epoch_row;

#define KH_ENV_MAX 32
typedef struct kh_cell_record {
    char plugin[64], task[64], device[32];
    char status[16];
    char reason[512];
    int epochs_requested, batch_size;
    uint64_t seed;
    int64_t train_samples, val_samples;
    char metric[16];
    double metric_value;       /* NAN when no epoch finished */
    double mean_epoch_s, median_epoch_s, time_to_target_s; /* NAN when absent */
    /* the target (kh_record_summarise): the task's value of its metric (NAN: none, or unknown), whether the
     * metric must drop to it (loss) rather than rise; the first epoch that reached it, KH_TARGET_NEVER when no
     * epoch did or there is no target (target_note says which), KH_TARGET_UNKNOWN when the record does not say */
    double target;
    int target_is_max;
    int epochs_to_target;
    char target_note[192];
    /* what the time means (docs/PERFORMANCE.md): NAN when unknown; gflops and roofline_fraction are
     * derived by kh_record_summarise from mean_epoch_s */
    double flops_per_epoch, bytes_per_epoch, gflops;
    double peak_gflops, peak_gbps, roofline_gflops, roofline_fraction;
    char peak_source[256];
    /* the hierarchical roofline (devices/roofline.h): the memory level the training step's working set lives
     * in and the ceiling the cell was held to; "" / NAN / 0 levels in older records */
    char roofline_level[8];
    double roofline_gbps, step_working_set_bytes;
    double sgemm_gflops, fma_gflops; /* the compute ceiling's two measurements (peak_gflops: the higher) */
    int n_mem_levels;
    kh_mem_level mem_levels[KH_MEM_LEVELS_MAX];
    char math[8];              /* the session's FP32 math, "fp32" | "tf32" (--math); "" in older records */
    char math_note[192];       /* why the asked mode was not applied ("tf32 ignored on cpu: ..."), else "" */
    /* model-compile time (ABI 1.2): NAN / "" / -1 when unknown (older records, failed compiles) */
    double compile_s;          /* host wall time of the compile call that made the trained model */
    char compile_cache[8];     /* "hit", "miss", "none"; "" when the backend has no compile_info */
    int compile_units;         /* -1 when unknown */
    double compile_codegen_s, compile_cc_s, compile_load_s; /* the backend's split (compile_info) */
    double compile_cold_s, compile_warm_s;
    kh_epoch_row *rows; int n_rows, cap_rows;
    /* repetition (khost_record 2): rep_index of rep_of (1 of 1: a single run), its round and the cell's
     * 0-based position in that round's order, the seed the order was drawn from (0: no drawn order) */
    int record_version;        /* its "khost_record" (above KH_RECORD_VERSION: from a newer khost) */
    int rep_index, rep_of, rep_round, rep_position;
    uint64_t order_seed;
    /* raw samples: the wall time of every timed training step, epoch after epoch (from the previous step's
     * end, or the epoch's start, to the end of this step after the backend's sync when step_sync is
     * "device"); the warm-up steps before epoch 1 are not among them */
    double *step_s; int64_t n_step_s, cap_step_s;
    char step_sync[16];        /* "device" | "host-loss" (Keras 3 references) | "none" | "" (no samples) */
    int64_t warmup_steps, steps_per_epoch;
    int64_t peak_rss_bytes;    /* the cell process's peak resident set; -1 unknown */
    /* CUDA devices: free device memory (cuMemGetInfo) after the session opened and after training; -1
     * unknown. dev_peak_bytes: the backend's own count of what the model held at its peak (ABI 1.4
     * memory_info; -1 not counted), dev_mem_what what that count covers. */
    int64_t dev_free_before, dev_free_after, dev_peak_bytes;
    char dev_mem_what[160];
    /* the record's "energy" member as JSON text (kh_energy_json, core/devices/energy.h): per timed epoch
     * joules and average watts, or "unavailable" with the reason; NULL when the cell never ran (malloc'ed) */
    char *energy_json;
    int n_env;                 /* environment as ordered key/value strings */
    char env_key[KH_ENV_MAX][32];
    char env_val[KH_ENV_MAX][256];
} kh_cell_record;

void kh_record_init(kh_cell_record *r);
/* A name a record, a results folder or a file name may hold (task, plugin, device, a cell's file base): 1 to
 * max bytes of letters, digits and _ . : + -, not starting with '.' or '-'. Anything else in those places is
 * refused, so a name can be printed anywhere (a table, a page, a path) without changing its meaning. */
int kh_record_name_ok(const char *s, size_t max);
#define KH_RECORD_NAME_CHARS "letters, digits and _ . : + -"
void kh_record_free(kh_cell_record *r);
/* Seconds as tables and progress lines show them: "12.3", more digits below a second (short smoke runs do not
 * print 0.0), unknown for a time that is not finite. */
void kh_fmt_seconds(double s, const char *unknown, char *buf, size_t n);
int kh_record_add_row(kh_cell_record *r, const kh_epoch_row *row); /* 0 ok, -1 out of memory */
int kh_record_add_step(kh_cell_record *r, double seconds);           /* 0 ok, -1 out of memory */
void kh_record_set_env(kh_cell_record *r, const char *key, const char *value);
const char *kh_record_get_env(const kh_cell_record *r, const char *key);
#define KH_TARGET_NEVER 0
#define KH_TARGET_UNKNOWN (-1)
/* Fill mean/median/metric_value from rows (median excludes epoch 1 when there are more), and the target:
 * target (> 0; 0 = the task sets none) is reached by the first epoch whose metric (loss for a "loss" record,
 * else val_acc) is at most it (target_is_max) or at least it; time_to_target_s is that epoch's elapsed time. */
void kh_record_summarise(kh_cell_record *r, int target_is_max, double target);

/* "<out>/<task>/<plugin>__<device-without-colon>.<ext>" into buf. */
void kh_record_path(char *buf, size_t n, const char *out_dir, const char *task, const char *plugin,
                    const char *device, const char *ext);
/* The same for repetition rep of a repeated cell: "...__<device>.rep<rep>.<ext>"; rep 0 = kh_record_path. */
void kh_record_rep_path(char *buf, size_t n, const char *out_dir, const char *task, const char *plugin,
                        const char *device, int rep, const char *ext);
/* Write the CSV and JSON (creating <out>/<task>/); 0 ok, else err says which file and why. */
int kh_record_write(const kh_cell_record *r, const char *out_dir, char *err, size_t errlen);
/* The JSON text of a record (malloc'ed, one line when compact). */
char *kh_record_to_json(const kh_cell_record *r, int compact);
/* Parse a JSON record file; err names the file and the field. */
int kh_record_read(const char *path, kh_cell_record *r, char *err, size_t errlen);
/* A record file parsed (cJSON_Delete it); NULL with err naming the file: cannot open, read error, out of
 * memory, not valid JSON, a key twice in one object, "khost_record" missing or not a positive integer.
 * *version gets it: a version above KH_RECORD_VERSION is from a newer khost, read as far as this one
 * understands it (the caller warns: kh_record_newer_text). ints[0..n) get the exact integers asked for
 * (json_scan.h). */
#define KH_RECORD_VERSION 2
/* A record file's bytes, NUL-ended (free them): from the pack of a mounted folder (setfile.h) or the file,
 * which must be regular. NULL with err naming the file. */
char *kh_record_text(const char *path, size_t *len, char *err, size_t errlen);
struct cJSON;
struct kh_json_int;
struct cJSON *kh_record_json_read(const char *path, struct kh_json_int *ints, int n, int *version, char *err,
                                  size_t errlen);
/* The record's "target", "epochs_to_target" and "target_note" from its parsed JSON: the target's value (NAN: none),
 * whether the metric must drop to it, the epoch (KH_TARGET_NEVER for null, KH_TARGET_UNKNOWN when the record
 * predates them) and the note. 0, or -1 with err naming the file and the field when one is malformed (an epoch
 * that is not a whole number from 1, a target that is not a positive value with its direction). */
int kh_record_target_read(const struct cJSON *o, double *target, int *target_is_max, int *epochs, char *note,
                          size_t nn, const char *path, char *err, size_t errlen);
/* The warning for a record of a newer version, naming the file, into buf. */
void kh_record_newer_text(const char *path, int version, char *buf, size_t n);
#endif
