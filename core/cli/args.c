/* core/cli/args.c — option parsing (see args.h); errors name the option. */
#include "cli/args.h"

#include <errno.h>
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
    if (inline_value) return inline_value;
    if (a->i >= a->argc) {
        fprintf(stderr, "khost %s: option %s needs a value (see khost --help)\n", a->cmd, opt);
        return NULL;
    }
    return a->argv[a->i++];
}

int kh_args_int64(const char *opt, const char *s, int64_t min, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min) {
        fprintf(stderr, "khost: option %s: '%s' is not an integer >= %lld\n", opt, s, (long long)min);
        return -1;
    }
    *out = v;
    return 0;
}
