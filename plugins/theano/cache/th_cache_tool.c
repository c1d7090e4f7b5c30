/* plugins/theano/cache/th_cache_tool.c — khost-theano-cache: list and prune theano's generated-code cache. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "th_cache.h"

static const char usage[] =
    "usage: khost-theano-cache [--dir DIR] list\n"
    "       khost-theano-cache [--dir DIR] prune (--all | --older-than DAYS)\n"
    "theano's generated-code cache (default $XDG_CACHE_HOME/khost/theano, else ~/.cache/khost/theano).\n"
    "  list                 every entry: key, artifact, bytes, days since it was built or last used\n"
    "  prune --all          remove every entry\n"
    "  prune --older-than D remove the entries not built or used for D days (D may be fractional)\n"
    "  --dir DIR            the cache folder ([plugin theano] cache_dir)\n"
    "An entry being built (its lock held) is never removed; a process that loads an entry the moment it is\n"
    "pruned fails to load it, so prune when no khost runs, or with --older-than.\n";

static int print_entry(void *arg, const th_cache_entry_info *e) {
    (void)arg;
    printf("%s  %-10s %10llu bytes  %8.2f days\n", e->key, e->complete ? e->artifact : "incomplete",
           (unsigned long long)e->bytes, e->age_s / 86400.0);
    return 0;
}

static void print_line(void *arg, const char *line) {
    (void)arg;
    printf("%s\n", line);
}

int main(int argc, char **argv) {
    const char *dir = NULL, *cmd = NULL;
    int all = 0;
    double days = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(a, "--all")) {
            all = 1;
        } else if (!strcmp(a, "--older-than") && i + 1 < argc) {
            char *end;
            errno = 0;
            days = strtod(argv[++i], &end);
            if (errno || end == argv[i] || *end || !isfinite(days) || days < 0) {
                fprintf(stderr, "khost-theano-cache: --older-than wants a number of days >= 0, not '%s'\n", argv[i]);
                return 2;
            }
        } else if (!cmd && (!strcmp(a, "list") || !strcmp(a, "prune"))) {
            cmd = a;
        } else {
            fprintf(stderr, "khost-theano-cache: unexpected argument '%s'\n%s", a, usage);
            return 2;
        }
    }
    if (!cmd || (!strcmp(cmd, "prune") && all == (days >= 0)) || (!strcmp(cmd, "list") && (all || days >= 0))) {
        fputs(usage, stderr);
        return 2;
    }
    char def[TH_CACHE_PATH_MAX], err[TH_CACHE_PATH_MAX + 512];
    if (!dir) {
        if (th_cache_default_dir(def, sizeof def, err, sizeof err) != 0) {
            fprintf(stderr, "khost-theano-cache: %s\n", err);
            return 1;
        }
        dir = def;
    }
    struct stat st;
    if (stat(dir, &st) != 0 && errno == ENOENT) {
        printf("no cache at %s\n", dir);
        return 0;
    }
    if (th_cache_check_dir(dir, err, sizeof err) != 0) {
        fprintf(stderr, "khost-theano-cache: %s\n", err);
        return 1;
    }
    if (!strcmp(cmd, "list")) {
        printf("cache %s\n", dir);
        int n = th_cache_list(dir, print_entry, NULL, err, sizeof err);
        if (n < 0) {
            fprintf(stderr, "khost-theano-cache: %s\n", err);
            return 1;
        }
        printf("%d entr%s\n", n, n == 1 ? "y" : "ies");
        return 0;
    }
    th_cache_prune_stats s;
    int rc = th_cache_prune(dir, all ? -1.0 : days * 86400.0, &s, print_line, NULL, err, sizeof err);
    printf("pruned %s: %u removed (%llu bytes), %u kept being built, %u kept younger than the limit, %u failed\n", dir,
           s.removed, (unsigned long long)s.bytes_removed, s.kept_busy, s.kept_young, s.failed);
    if (rc != 0) {
        fprintf(stderr, "khost-theano-cache: %s\n", err);
        return 1;
    }
    return 0;
}
