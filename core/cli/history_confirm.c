/* core/cli/history_confirm.c — `khost history --confirm`: a change point re-measured by running the builds of
 * the revisions on either side of it side by side (history.h). */
#define _GNU_SOURCE /* mkdtemp */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/child.h"
#include "cli/history_confirm.h"
#include "khost/kit/regular.h"

extern char **environ;

/* The build given for revision rev (its first 7 digits; a --build REV may be longer or shorter). */
static const char *build_of(const kh_hist_confirm *cf, const char *rev) {
    size_t rl = strcspn(rev, "-"); /* "abc1234-dirty" is its own revision: matched whole */
    for (int i = 0; i < cf->n_builds; i++) {
        const char *b = cf->builds[i].rev;
        size_t bl = strlen(b), n = bl < rl ? bl : rl;
        if (n >= 4 && !strncmp(b, rev, n) && (rev[rl] == 0 || !strcmp(b, rev))) return cf->builds[i].khost;
    }
    return NULL;
}

static const char *text_of(const cJSON *o, const char *key) {
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
    return v ? v : "";
}

/* The compare's verdict of the cell from its --json output (in a log that may hold warnings first). */
static int read_verdict(const char *log, const char *task, const char *plugin, const char *device, char *verdict,
                        size_t vn, double *ratio, double *lo, double *hi) {
    char why[600];
    FILE *f = kh_fopen_regular(log, why, sizeof why);
    if (!f) return -1;
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    char *start = strstr(text, "\n{");
    start = text[0] == '{' ? text : start ? start + 1 : NULL;
    cJSON *o = start ? cJSON_Parse(start) : NULL;
    int rc = -1;
    for (const cJSON *c = cJSON_GetObjectItem(o, "cells") ? cJSON_GetObjectItem(o, "cells")->child : NULL; c; c = c->next) {
        if (strcmp(text_of(c, "task"), task) || strcmp(text_of(c, "plugin"), plugin) || strcmp(text_of(c, "device"), device))
            continue;
        snprintf(verdict, vn, "%s", text_of(c, "verdict"));
        const cJSON *r = cJSON_GetObjectItem(c, "ratio"), *l = cJSON_GetObjectItem(c, "ratio_ci_lo"),
                    *h = cJSON_GetObjectItem(c, "ratio_ci_hi");
        *ratio = cJSON_IsNumber(r) ? r->valuedouble : NAN;
        *lo = cJSON_IsNumber(l) ? l->valuedouble : NAN;
        *hi = cJSON_IsNumber(h) ? h->valuedouble : NAN;
        rc = 0;
    }
    cJSON_Delete(o);
    return rc;
}

void kh_history_confirm(const kh_hist_confirm *cf, const kh_hist_series *s, const kh_hist_change *c, char *out,
                        size_t n) {
    const char *rev_a = s->revs[c->after - 1].name, *rev_b = s->revs[c->after].name;
    const char *bin[2] = {build_of(cf, rev_a), build_of(cf, rev_b)};
    if (!bin[0] || !bin[1]) {
        snprintf(out, n, "not confirmed: no --build for %s", !bin[0] ? rev_a : rev_b);
        return;
    }
    char dir[4200], side[2][4300], log[4400], rounds[16], steps[16], rep[96];
    snprintf(dir, sizeof dir, "%s/khost-confirm-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        snprintf(out, n, "not confirmed: cannot make a folder in %s", dir);
        return;
    }
    snprintf(rounds, sizeof rounds, "%d", cf->rounds);
    snprintf(steps, sizeof steps, "%d", cf->steps);
    for (int k = 0; k < 2; k++) snprintf(side[k], sizeof side[k], "%s/%s", dir, k ? "new" : "base");
    for (int r = 1; r <= cf->rounds; r++)
        for (int p = 0; p < 2; p++) { /* alternating which build goes first: drift lands on both */
            int k = (r + p) % 2;
            snprintf(rep, sizeof rep, "%d/%d/%d/%d/1", r, cf->rounds, r, p);
            snprintf(log, sizeof log, "%s/%s.rep%d.log", dir, k ? "new" : "base", r);
            char *argv[] = {(char *)bin[k], "run", "--plugin", (char *)s->plugin, "--task", (char *)s->task,
                            "--device", (char *)s->device, "--epochs", "1", "--steps", steps, "--warmup-steps", "5",
                            "--out", side[k], "--repetition", rep, "--quiet", NULL};
            kh_child_result res;
            if (kh_child_run(argv, environ, log, cf->timeout_s, 5.0, &res) != 0 || res.outcome != KH_CHILD_EXITED ||
                res.code != 0) {
                snprintf(out, n, "not confirmed: the run of %s failed (%s)", k ? rev_b : rev_a, log);
                return;
            }
        }
    snprintf(log, sizeof log, "%s/compare.json", dir);
    char *argv[] = {(char *)cf->self, "compare", side[0], side[1], "--json", NULL};
    kh_child_result res;
    char verdict[32];
    double ratio, lo, hi;
    if (kh_child_run(argv, environ, log, 600, 5.0, &res) != 0 ||
        read_verdict(log, s->task, s->plugin, s->device, verdict, sizeof verdict, &ratio, &lo, &hi) != 0) {
        snprintf(out, n, "not confirmed: the comparison failed (%s)", log);
        return;
    }
    const char *want = c->change > 0 ? "slower" : "faster";
    const char *what = !strcmp(verdict, want) ? "confirmed"
                       : !strcmp(verdict, "unchanged") ? "refuted (no change side by side)"
                       : !strcmp(verdict, "slower") || !strcmp(verdict, "faster") ? "refuted (the other way side by side)"
                       : "inconclusive";
    /* Too noisy for the ±noise band, yet the side-by-side interval lies wholly short of half the step the
     * history found: the step as found is not there, whatever smaller change the noise may hide. */
    if (!strcmp(verdict, "too noisy to tell") && (c->change > 0 ? hi - 1 < c->change / 2 : lo - 1 > c->change / 2))
        what = "refuted (the side-by-side interval excludes half the change)";
    snprintf(out, n, "%s: %s against %s side by side, %d rounds: %+.1f %% [%+.1f, %+.1f], %s (records in %s)", what,
             rev_b, rev_a, cf->rounds, 100 * (ratio - 1), 100 * (lo - 1), 100 * (hi - 1), verdict, dir);
}
