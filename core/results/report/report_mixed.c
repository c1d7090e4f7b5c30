/* core/results/report/report_mixed.c — whether a task's device column holds records of different machines or
 * builds (results/identity.h: the one definition compare uses too), and which backend's are which. `khost report`
 * refuses such a column unless --mixed is given, and then marks it (report.c, report_html.c). */
#include "results/report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/identity.h"

static void identity_of_record(const kh_cell_record *r, kh_identity *id) {
    kh_identity_set(id, r->device, kh_record_get_env(r, "cpu_model"), kh_record_get_env(r, "cpu_isa"),
                    kh_record_get_env(r, "device_name"), kh_record_get_env(r, "khost_version"),
                    kh_record_get_env(r, "git_rev"), kh_record_get_env(r, "reference"));
}

/* The identities of column d: each backend's record and its repetitions (backend index in *who). */
typedef struct ids {
    kh_identity *v;
    int *who;
    int n;
} ids;

static int collect(const kh_report_task *t, int d, ids *o) {
    int cap = 0;
    for (int p = 0; p < t->np; p++) {
        const kh_cell_stats *s = t->stats ? t->stats[p * t->nd + d] : NULL;
        cap += 1 + (s ? s->n_reps : 0);
    }
    o->n = 0;
    o->v = malloc((size_t)(cap ? cap : 1) * sizeof *o->v);
    o->who = malloc((size_t)(cap ? cap : 1) * sizeof *o->who);
    if (!o->v || !o->who) {
        free(o->v);
        free(o->who);
        return -1;
    }
    for (int p = 0; p < t->np; p++) {
        const kh_cell_record *r = t->cells[p * t->nd + d];
        const kh_cell_stats *s = t->stats ? t->stats[p * t->nd + d] : NULL;
        if (r) identity_of_record(r, &o->v[o->n]), o->who[o->n++] = p;
        for (int k = 0; s && k < s->n_reps; k++) o->v[o->n] = s->reps[k].id, o->who[o->n++] = p;
    }
    return 0;
}

/* One identity as the list shows it: the machine, the build, or both, by what differs. */
static void text_of(const kh_identity *id, int what, char *buf, size_t n) {
    char m[200], b[128];
    kh_identity_machine_text(id, m, sizeof m);
    kh_identity_build_text(id, b, sizeof b);
    if (what == (KH_REPORT_MIXED_MACHINES | KH_REPORT_MIXED_BUILDS)) snprintf(buf, n, "%s, %s", m, b);
    else snprintf(buf, n, "%s", what == KH_REPORT_MIXED_MACHINES ? m : b);
}

int kh_report_mixed(const kh_report_task *t, int d, char *list, size_t n) {
    ids x;
    list[0] = 0;
    if (collect(t, d, &x) != 0) {
        snprintf(list, n, "(out of memory: not checked)");
        return -1;
    }
    int what = 0;
    for (int i = 0; i < x.n; i++)
        for (int j = i + 1; j < x.n; j++) {
            if (kh_identity_machine_differs(&x.v[i], &x.v[j])) what |= KH_REPORT_MIXED_MACHINES;
            if (kh_identity_build_differs(&x.v[i], &x.v[j])) what |= KH_REPORT_MIXED_BUILDS;
        }
    /* each backend with what it names, once per distinct text: "cntk: AMD EPYC (avx2); tensorflow: ..." (a backend
     * whose repetitions differ among themselves is named once for each) */
    size_t used = 0;
    for (int p = 0; what && p < t->np; p++) {
        char seen[4][256];
        int ns = 0;
        for (int i = 0; i < x.n; i++) {
            const kh_identity *id = &x.v[i];
            int says = ((what & KH_REPORT_MIXED_MACHINES) && id->machine[0]) ||
                       ((what & KH_REPORT_MIXED_BUILDS) && id->rev[0] && !id->reference);
            if (x.who[i] != p || !says) continue;
            char one[400];
            text_of(id, what, one, sizeof one);
            int dup = 0;
            for (int k = 0; k < ns; k++) dup |= !strcmp(seen[k], one);
            if (dup) continue;
            if (ns < 4) snprintf(seen[ns++], sizeof seen[0], "%s", one);
            if (used < n)
                used += (size_t)snprintf(list + used, n - used, "%s%s: %s", used ? "; " : "", t->plugins[p], one);
        }
    }
    free(x.v);
    free(x.who);
    return what;
}

const char *kh_report_mixed_what(int what) {
    return what == (KH_REPORT_MIXED_MACHINES | KH_REPORT_MIXED_BUILDS) ? "different machines and builds"
           : what == KH_REPORT_MIXED_BUILDS                            ? "different builds"
                                                                       : "different machines";
}
