/* core/base/args.c — option parsing (see args.h); errors name the option. */
#include "base/args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kh_args_init(kh_args *a, const char *cmd, int argc, char **argv) {
    a->argc = argc;
    a->argv = argv;
    a->i = 1;
    a->cmd = cmd;
}

const char *kh_args_next(kh_args *a, const char **inline_value) {
    static char name[64];
    *inline_value = NULL;
    if (a->i >= a->argc) return NULL;
    const char *arg = a->argv[a->i++];
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    if (!eq) return arg;
    snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
    *inline_value = eq + 1;
    return name;
}

const char *kh_args_value(kh_args *a, const char *opt, const char *inline_value) {
    const char *v = inline_value;
    if (!v && a->i < a->argc) v = a->argv[a->i++];
    if (!v || !*v) { /* an empty value names nothing: never a silent default ("--device ''" is not cpu) */
        fprintf(stderr, "khost %s: option %s needs a value%s (see khost --help)\n", a->cmd, opt,
                v ? ", not an empty one" : "");
        return NULL;
    }
    return v;
}

int kh_args_unknown(const kh_args *a, const char *opt) {
    fprintf(stderr, "khost %s: unknown option '%s' (see khost --help)\n", a->cmd, opt);
    return -1;
}

int kh_args_need_cell(const kh_args *a, const char *plugin, const char *task) {
    if (plugin && task) return 0;
    fprintf(stderr, "khost %s: --plugin and --task are required (see khost --help)\n", a->cmd);
    return -1;
}

int64_t kh_args_max(const char *opt) {
    /* counts the host keeps in an int (epochs, batch sizes, steps, cores): larger values must not wrap */
    static const char *const int_opts[] = {"--epochs", "--batch-size", "--batch", "--steps", "--warmup",
                                           "--warmup-steps", "--cpus-per-cell"};
    for (size_t i = 0; i < sizeof int_opts / sizeof *int_opts; i++)
        if (!strcmp(opt, int_opts[i])) return INT_MAX;
    return INT64_MAX;
}

int kh_args_int64(const char *opt, const char *s, int64_t min, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int64_t max = kh_args_max(opt);
    if (errno || end == s || *end || v < min || v > max) {
        fprintf(stderr, "khost: option %s: '%s' is not an integer from %lld to %lld\n", opt, s, (long long)min,
                (long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

int kh_args_seconds(const char *s, double *out) {
    char *end = NULL;
    errno = 0;
    double t = strtod(s, &end);
    if (!*s || *end || errno || !(t >= 0) || !isfinite(t)) return -1;
    *out = t;
    return 0;
}
