/* core/sched/matrix_options.c — `khost matrix`'s options: parsed, checked, the usage text (matrix_internal.h). */
#include "sched/matrix_internal.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/args.h"
#include "base/exitcodes.h"
#include "base/procguard.h"
#include "cell/mathmode.h"
#include "base/log.h"

// --- options --------------------------------------------------------------------------------------------

static void mx_usage(FILE *f) {
    fprintf(f,
            "usage: khost matrix [--plugins LIST|all] [--tasks LIST|all] [--devices LIST|all]\n"
            "                    [--epochs N] [--batch-size N] [--limit-train N] [--limit-val N] [--seed N]\n"
            "                    [--steps N] [--warmup-steps N] [--timing] [--repeat N|auto[:PCT%%[:BUDGET]]] [--seeds N]\n"
            "                    [--order-seed S] [--math fp32|tf32] [--references LIST|all] [--out DIR]\n"
            "                    [--timeout SECONDS] [--memory-limit BYTES[K|M|G]] [--db FILE] [--resume] [--quiet]\n"
            "Runs every plugin x task x device cell in its own child process (khost run).\n"
            "  LIST            comma-separated names; all = every enabled module / every device\n"
            "                  (defaults: plugins all, tasks all, devices = the registry's default_device)\n"
            "  --out DIR       results folder (default: the registry's results_dir)\n"
            "  --timeout S     per cell; 0 = none (default 21600, six hours)\n"
            "  --memory-limit  per cell address space (RLIMIT_AS), e.g. 4G; a cell over it is recorded as oom\n"
            "  --steps N       train N batches per epoch (steady-state timing); --warmup-steps N untimed before\n"
            "  --timing        the timing protocol: --epochs 1 --steps 100 --warmup-steps 5 (the Keras 3 benchmarks');\n"
            "                  a count given as well overrides its part; --references without --epochs, --steps,\n"
            "                  --warmup-steps or --seeds uses it too (not with --seeds)\n"
            "  --math M        FP32 math of every cell: fp32 (default, strict) or tf32 (CUDA tensor cores; a cpu\n"
            "                  cell records fp32 and that tf32 was ignored)\n"
            "  --repeat auto[:PCT%%[:BUDGET]]  rounds until every cell's median has a 95 %% CI within PCT of it\n"
            "                  (default 3 %%) or BUDGET is spent (default 20m; s, m, h); at least 3 rounds, at most\n"
            "                  30; a cell that is precise stops early; each cell says which ended it\n"
            "  --repeat N      run every cell N times, each a fresh child, in rounds: within a round the cells\n"
            "                  run in an order shuffled from --order-seed (default: from the clock; recorded)\n"
            "                  and repetition k is written as <task>/<plugin>__<device>.rep<k>.json\n"
            "  --seeds N       train every cell from N seeds: --seed S (default: the registry's seed), S+1, ...,\n"
            "                  S+N-1, one round per seed (seed k is repetition k, rounds shuffled as with --repeat);\n"
            "                  khost report adds each task's accuracy across seeds (mean, sd, 95 %% t-interval) and\n"
            "                  epochs and time to target, and flags a backend that converges outside the others'\n"
            "                  range; not with --repeat N > 1 or auto (each seed is one repetition)\n"
            "  --references L  also run these frameworks of tools/reference as cells, in the same rounds and with the\n"
            "                  same options and seeds: pytorch, keras3-jax, keras3-tensorflow, keras3-torch, or all\n"
            "                  (tools/reference/setup installs them; --plugins none runs only the references)\n"
            "  --db FILE       also add each record, as it lands, to the results database FILE (the set named by\n"
            "                  the absolute --out; khost db import does the same for a finished folder)\n"
            "  --resume        skip cells (repetitions) already recorded as ok or unsupported with the same\n"
            "                  settings (with --seeds: the same seed) on this machine by this build; rerun the\n"
            "                  others (a record of another machine or build says so: a column is redone here)\n"
            "  --quiet         print only failed cells and the summary\n"
            "  --slurm ...     submit the cells as a Slurm job array instead (khost matrix --slurm --help)\n"
            "Exit status: 0 when every cell ended ok or unsupported, 1 otherwise.\n");
}

/* "auto[:PCT[%][:BUDGET]]": PCT the target half-width of each median's 95 % CI, relative (0.1 to 50); BUDGET a
 * duration ("90s", "20m", "1h", or seconds). 0 ok. */
static int parse_auto(const char *v, kh_matrix_opts *o) {
    double pct = 3, budget = 20 * 60;
    const char *p = v + 4;
    if (*p == ':') {
        char *end;
        pct = strtod(p + 1, &end);
        if (end == p + 1 || !isfinite(pct) || pct < 0.1 || pct > 50) return -1;
        p = end + (*end == '%');
        if (*p == ':') {
            budget = strtod(p + 1, &end);
            if (end == p + 1 || !isfinite(budget) || budget <= 0) return -1;
            budget *= *end == 'h' ? 3600 : *end == 'm' ? 60 : 1;
            p = end + (*end == 'h' || *end == 'm' || *end == 's');
        }
    }
    if (*p) return -1;
    o->repeat_auto = 1, o->repeat = KH_MATRIX_AUTO_MAX_ROUNDS, o->auto_pct = pct, o->auto_budget_s = budget;
    return 0;
}

/* A positive decimal integer (what the child accepts); returns 0 when valid. */
static int check_count(const char *opt, const char *v, int allow_zero) {
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *v == '-' || *v == '+' || *end || errno || (!allow_zero && x == 0) ||
        x > (unsigned long long)kh_args_max(opt)) {
        kh_logf(KH_LOG_ERROR, "matrix: %s expects a %s integer of at most %lld, got '%s'", opt,
                allow_zero ? "non-negative" : "positive", (long long)kh_args_max(opt), v);
        return -1;
    }
    return 0;
}

void kh_matrix_opts_init(kh_matrix_opts *o) {
    memset(o, 0, sizeof *o);
    o->timeout_s = KH_MATRIX_DEFAULT_TIMEOUT_S;
    o->repeat = 1;
}

int mx_parse(int argc, char **argv, kh_matrix_opts *o) {
    kh_matrix_opts_init(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char name[64];
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        if (!strcmp(name, "-h") || !strcmp(name, "--help")) {
            mx_usage(stdout);
            return 1;
        }
        if (!strcmp(name, "--resume") || !strcmp(name, "--quiet") || !strcmp(name, "--timing")) {
            if (val) {
                kh_logf(KH_LOG_ERROR, "matrix: %s takes no value", name);
                return -1;
            }
            *(!strcmp(name, "--resume") ? &o->resume : !strcmp(name, "--quiet") ? &o->quiet : &o->timing) = 1;
            continue;
        }
        static const char *const with_value[] = {"--plugins",     "--tasks",     "--devices",   "--out",
                                                 "--epochs",      "--batch-size", "--limit-train",
                                                 "--limit-val",   "--seed",      "--timeout",
                                                 "--memory-limit", "--steps",    "--warmup-steps",
                                                 "--repeat",      "--order-seed", "--math",
                                                 "--references",  "--db",        "--seeds"};
        size_t k;
        for (k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            if (!strcmp(name, with_value[k])) break;
        if (k == sizeof with_value / sizeof with_value[0]) {
            kh_logf(KH_LOG_ERROR, "matrix: unknown option '%s' (khost matrix --help lists them)", a);
            return -1;
        }
        if (!val) {
            if (i + 1 >= argc) {
                kh_logf(KH_LOG_ERROR, "matrix: %s needs a value", name);
                return -1;
            }
            val = argv[++i];
        }
        if (!*val) { /* an empty value names nothing: never a silent default (--out '' is not the root) */
            kh_logf(KH_LOG_ERROR, "matrix: %s needs a value, not an empty one", name);
            return -1;
        }
        if (!strcmp(name, "--plugins")) o->plugins = val;
        else if (!strcmp(name, "--tasks")) o->tasks = val;
        else if (!strcmp(name, "--devices")) o->devices = val;
        else if (!strcmp(name, "--out")) o->out = val;
        else if (!strcmp(name, "--references")) o->references = val;
        else if (!strcmp(name, "--db")) o->db = val;
        else if (!strcmp(name, "--timeout")) {
            if (kh_args_seconds(val, &o->timeout_s) != 0) {
                kh_logf(KH_LOG_ERROR, "matrix: --timeout expects seconds >= 0, got '%s'", val);
                return -1;
            }
        } else if (!strcmp(name, "--math")) {
            uint32_t m;
            if (kh_math_parse(val, &m) != 0) {
                kh_logf(KH_LOG_ERROR, "matrix: --math expects fp32 or tf32, got '%s'", val);
                return -1;
            }
            o->math = val;
        } else if (!strcmp(name, "--memory-limit")) {
            uint64_t bytes;
            if (kh_parse_bytes(val, &bytes) != 0 || bytes < (16u << 20)) {
                kh_logf(KH_LOG_ERROR, "matrix: --memory-limit expects a size of at least 16M (bytes, or with K, M, G), "
                                      "got '%s'", val);
                return -1;
            }
            o->memory_limit = val;
        } else if (!strcmp(name, "--repeat") && !strncmp(val, "auto", 4)) {
            if (parse_auto(val, o) != 0) {
                kh_logf(KH_LOG_ERROR, "matrix: --repeat expects a count from 1 to 1000 or auto[:PCT%%[:BUDGET]] (e.g. "
                                      "auto:3%%:20m; BUDGET in s, m or h), got '%s'", val);
                return -1;
            }
        } else if (!strcmp(name, "--seeds")) {
            char *end = NULL;
            errno = 0;
            unsigned long x = strtoul(val, &end, 10);
            if (!*val || *val == '-' || *val == '+' || *end || errno || x < 1 || x > 1000) {
                kh_logf(KH_LOG_ERROR, "matrix: --seeds expects a count from 1 to 1000, got '%s'", val);
                return -1;
            }
            o->seeds = (int)x;
        } else if (!strcmp(name, "--repeat") || !strcmp(name, "--order-seed")) {
            char *end = NULL;
            errno = 0;
            unsigned long long x = strtoull(val, &end, 10);
            int is_repeat = !strcmp(name, "--repeat");
            if (!*val || *val == '-' || *val == '+' || *end || errno || (is_repeat && (x < 1 || x > 1000))) {
                kh_logf(KH_LOG_ERROR, "matrix: %s expects %s, got '%s'", name,
                        is_repeat ? "a count from 1 to 1000" : "a non-negative integer", val);
                return -1;
            }
            if (is_repeat) o->repeat = (int)x, o->repeat_auto = 0; /* the last --repeat given counts */
            else o->order_seed = x, o->order_seed_set = 1;
        } else {
            int allow_zero = !strcmp(name, "--seed") || !strncmp(name, "--limit", 7) || !strcmp(name, "--warmup-steps");
            if (check_count(name, val, allow_zero)) return -1;
            if (!strcmp(name, "--steps")) o->steps = val;
            else if (!strcmp(name, "--warmup-steps")) o->warmup_steps = val;
            else if (!strcmp(name, "--epochs")) o->epochs = val;
            else if (!strcmp(name, "--batch-size")) o->batch_size = val;
            else if (!strcmp(name, "--limit-train")) o->limit_train = val;
            else if (!strcmp(name, "--limit-val")) o->limit_val = val;
            else o->seed = val;
        }
    }
    /* Each seed is one repetition: N seeds are N rounds. R repetitions of each seed would make a cell's
     * repetitions two kinds of sample at once (seeds and reruns of one seed), and --repeat auto stops on the
     * time's precision, which has nothing to do with how many seeds the accuracy needs. */
    if (o->seeds > 1 && (o->repeat_auto || o->repeat > 1)) {
        kh_logf(KH_LOG_ERROR, "matrix: --seeds %d with --repeat %s: each seed is one repetition already (round k runs "
                "seed k); give one of them", o->seeds, o->repeat_auto ? "auto" : "N > 1");
        return -1;
    }
    if (o->timing && o->seeds > 1) {
        kh_logf(KH_LOG_ERROR, "matrix: --timing with --seeds: seeds train to the task's accuracy, the timing protocol "
                "times %s steps of one epoch; give one of them", KH_MATRIX_TIMING_STEPS);
        return -1;
    }
    /* Reference rows are there to compare time: alone they get the timing protocol rather than full training
     * (hours for a framework on CPU), every row the same counts. Any count given means the caller chose. */
    if (o->references && !o->epochs && !o->steps && !o->warmup_steps && o->seeds <= 1) o->timing = 1;
    if (o->timing) {
        if (!o->epochs) o->epochs = KH_MATRIX_TIMING_EPOCHS;
        if (!o->steps) o->steps = KH_MATRIX_TIMING_STEPS;
        if (!o->warmup_steps) o->warmup_steps = KH_MATRIX_TIMING_WARMUP;
    }
    return 0;
}
