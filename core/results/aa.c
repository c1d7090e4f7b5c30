/* core/results/aa.c — an A/A comparison's false-positive rate and smallest detectable change (aa.h). */
#include "results/aa.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/stats.h"

/* The repetition that stands for both sides until one differs, and where it was read. */
typedef struct ref {
    const kh_rep *rep;
    const char *side, *task;
} ref;

/* "BASE mnist_mlp/cntk__cpu.rep2.json" */
static void where(char *buf, size_t n, const char *side, const char *task, const kh_rep *r) {
    snprintf(buf, n, "%s %s%s%s", side, task, task[0] ? "/" : "", r->file);
}

/* One repetition against the reference: 0 when it names the same build and machine, else -1 with a->why. */
static int check_rep(kh_aa *a, ref *f, const char *side, const char *task, const kh_rep *r) {
    char here[400], there[400], x[200], y[200];
    where(here, sizeof here, side, task, r);
    if (!kh_identity_build_known(&r->id) || !kh_identity_machine_known(&r->id)) {
        int build = !kh_identity_build_known(&r->id);
        snprintf(a->why, sizeof a->why, "%s does not say which %s measured it (no %s in its environment)", here,
                 build ? "build" : "machine",
                 build ? "git_rev" : r->id.cuda ? "device_name" : !r->id.machine[0] ? "cpu_model" : "cpu_isa");
        return -1;
    }
    if (!f->rep) {
        *f = (ref){r, side, task};
        return 0;
    }
    where(there, sizeof there, f->side, f->task, f->rep);
    if (kh_identity_build_differs(&f->rep->id, &r->id)) {
        kh_identity_build_text(&f->rep->id, x, sizeof x);
        kh_identity_build_text(&r->id, y, sizeof y);
        snprintf(a->why, sizeof a->why, "%s was measured by %s, %s by %s", there, x, here, y);
        return -1;
    }
    if (kh_identity_machine_differs(&f->rep->id, &r->id)) {
        kh_identity_machine_text(&f->rep->id, x, sizeof x);
        kh_identity_machine_text(&r->id, y, sizeof y);
        snprintf(a->why, sizeof a->why, "%s was measured on %s, %s on %s", there, x, here, y);
        return -1;
    }
    /* the reference names the build: a khost row rather than a tools/reference one, the longer revision */
    if ((f->rep->id.reference && !r->id.reference) ||
        (f->rep->id.reference == r->id.reference && strlen(r->id.rev) > strlen(f->rep->id.rev)))
        *f = (ref){r, side, task};
    return 0;
}

void kh_aa_identify(const kh_cmp_side s[2], kh_aa *a) {
    ref f = {0};
    a->same = 0;
    a->why[0] = a->build[0] = a->machine[0] = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s[k].n; i++) {
            const kh_cell_stats *c = &s[k].c[i].st;
            for (int j = 0; j < c->n_reps; j++)
                if (!strcmp(c->reps[j].status, "ok") &&
                    check_rep(a, &f, k ? "NEW" : "BASE", s[k].c[i].task, &c->reps[j]) != 0)
                    return;
        }
    if (!f.rep) {
        snprintf(a->why, sizeof a->why, "neither side has a finished repetition");
        return;
    }
    if (f.rep->id.reference) {
        snprintf(a->why, sizeof a->why, "every finished repetition is a tools/reference row: no khost build measured them");
        return;
    }
    a->same = 1;
    kh_identity_build_text(&f.rep->id, a->build, sizeof a->build);
    kh_identity_machine_text(&f.rep->id, a->machine, sizeof a->machine);
}

double kh_aa_detectable(double lo, double hi, double noise_pct, double *slower, double *faster) {
    double t = noise_pct / 100;
    *slower = *faster = NAN;
    if (!(lo > 0) || !(hi >= lo) || !isfinite(hi)) return NAN;
    *slower = 100 * ((1 + t) / lo - 1);
    *faster = 100 * (1 - (1 - t) / hi);
    return *slower > *faster ? *slower : *faster;
}

static int has_verdict(kh_verdict v) {
    return v == KH_V_FASTER || v == KH_V_SLOWER || v == KH_V_UNCHANGED || v == KH_V_NOISY;
}

int kh_aa_compute(const kh_cmp_row *rows, int nr, const kh_cmp_rule *ru, kh_aa *a) {
    size_t n = (size_t)(nr > 0 ? nr : 1);
    a->slower = malloc(n * sizeof *a->slower);
    a->faster = malloc(n * sizeof *a->faster);
    a->detect = malloc(n * sizeof *a->detect);
    double *sorted = malloc(n * sizeof *sorted);
    if (!a->slower || !a->faster || !a->detect || !sorted) {
        free(sorted);
        return -1;
    }
    a->with_verdict = a->false_pos = a->too_noisy = a->n_detect = 0;
    a->largest_row = -1;
    a->median = a->largest = NAN;
    for (int i = 0; i < nr; i++) {
        const kh_cmp_row *r = &rows[i];
        a->slower[i] = a->faster[i] = a->detect[i] = NAN;
        if (!has_verdict(r->v)) continue;
        a->with_verdict++;
        a->false_pos += r->v == KH_V_FASTER || r->v == KH_V_SLOWER;
        a->too_noisy += r->v == KH_V_NOISY;
        a->detect[i] = kh_aa_detectable(r->vci.lo, r->vci.hi, ru->noise, &a->slower[i], &a->faster[i]);
        if (!isfinite(a->detect[i])) continue;
        sorted[a->n_detect++] = a->detect[i];
        if (a->largest_row < 0 || a->detect[i] > a->largest) a->largest = a->detect[i], a->largest_row = i;
    }
    a->rate = a->with_verdict ? (double)a->false_pos / a->with_verdict : NAN;
    if (a->n_detect) a->median = kh_stats_median(sorted, a->n_detect);
    free(sorted);
    return 0;
}

void kh_aa_free(kh_aa *a) {
    free(a->slower);
    free(a->faster);
    free(a->detect);
    a->slower = a->faster = a->detect = NULL;
}
