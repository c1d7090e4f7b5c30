/* core/cli/compare_aa.c — the A/A section of `khost compare` in its three forms (compare_aa.h). The same
 * sentences go to the markdown and the page, each escaped where it lands: the build, the machine and a why
 * naming a file come from the records. */
#include "cli/compare_aa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"

/* The section's sentences. */
typedef struct aa_text {
    char title[96];
    char lead[900];   /* what the sets are, or the warning that they are not one build on one machine */
    char rate[200];
    char detect[400];
    char method[600];
} aa_text;

static void cell_name(const kh_cmp_row *r, char *buf, size_t n) {
    char plugin[256], device[64];
    kh_cmp_split_base(r->base, plugin, sizeof plugin, device, sizeof device);
    snprintf(buf, n, "%s%s%s %s", r->task, r->task[0] ? " " : "", plugin, device);
}

static void method_text(const kh_cmp_rule *ru, char *buf, size_t n) {
    snprintf(buf, n,
             "per cell, the smallest true change whose verdict interval, lo to hi of the ratio NEW / BASE at the "
             "%.4g %% level, would clear the noise band ±%g %%: a slowdown above (1 + %g %%) / lo - 1 or a speed-up "
             "above 1 - (1 - %g %%) / hi (scaling NEW's times scales the interval exactly), the larger of the two; "
             "about the noise threshold plus the interval's half-width",
             100 * ru->level, ru->noise, ru->noise, ru->noise);
}

static void texts(const kh_aa *a, int asked, const kh_cmp_row *rows, const kh_cmp_rule *ru, aa_text *t) {
    if (a->same) {
        snprintf(t->title, sizeof t->title, "A/A: one build on one machine%s", asked ? " (--aa)" : "");
        snprintf(t->lead, sizeof t->lead,
                 "BASE and NEW were measured by one build, %s, on one machine, %s: nothing changed between them, so "
                 "every faster or slower verdict is a false positive.",
                 a->build, a->machine);
    } else {
        snprintf(t->title, sizeof t->title, "A/A (asked with --aa): NOT one build on one machine");
        snprintf(t->lead, sizeof t->lead,
                 "Warning: BASE and NEW are not known to be one build on one machine: %s. The figures below count "
                 "every faster or slower verdict as a false positive, which holds only where nothing changed.",
                 a->why);
    }
    if (a->with_verdict)
        snprintf(t->rate, sizeof t->rate,
                 "false-positive rate: %.3g (%d of the %d cell%s with a verdict called faster or slower; %d too "
                 "noisy to tell)",
                 a->rate, a->false_pos, a->with_verdict, a->with_verdict == 1 ? "" : "s", a->too_noisy);
    else
        snprintf(t->rate, sizeof t->rate, "false-positive rate: none (no cell has a verdict)");
    if (a->n_detect) {
        char largest[600];
        cell_name(&rows[a->largest_row], largest, sizeof largest);
        snprintf(t->detect, sizeof t->detect,
                 "smallest change detectable on this machine: median %.2f %%, largest %.2f %% (%s), over %d cell%s",
                 a->median, a->largest, largest, a->n_detect, a->n_detect == 1 ? "" : "s");
    } else {
        snprintf(t->detect, sizeof t->detect, "smallest change detectable on this machine: none (no verdict interval)");
    }
    method_text(ru, t->method, sizeof t->method);
}

void kh_aa_markdown(FILE *f, const kh_aa *a, int asked, const kh_cmp_row *rows, const kh_cmp_rule *ru) {
    aa_text t;
    texts(a, asked, rows, ru, &t);
    fprintf(f, "\n## %s\n\n", t.title);
    kh_esc_md(f, t.lead);
    fputs("\n\n- ", f);
    kh_esc_md(f, t.rate);
    fputs(".\n- ", f);
    kh_esc_md(f, t.detect);
    fputs("; ", f);
    kh_esc_md(f, t.method);
    fputs(".\n", f);
}

static void add_text(cJSON *o, const char *key, const char *text) {
    char *valid = kh_esc_line_dup(text);
    cJSON_AddStringToObject(o, key, valid ? valid : "(out of memory)");
    free(valid);
}

static cJSON *num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

cJSON *kh_aa_json(const kh_aa *a, int asked, const kh_cmp_row *rows, int nr, const kh_cmp_rule *ru) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddBoolToObject(o, "asked", asked);
    cJSON_AddBoolToObject(o, "same_build_and_machine", a->same);
    add_text(o, "why_not", a->same ? "" : a->why);
    add_text(o, "build", a->build);
    add_text(o, "machine", a->machine);
    cJSON_AddNumberToObject(o, "cells_with_verdict", a->with_verdict);
    cJSON_AddNumberToObject(o, "false_positives", a->false_pos);
    cJSON_AddNumberToObject(o, "too_noisy", a->too_noisy);
    cJSON_AddItemToObject(o, "false_positive_rate", num(a->rate));
    cJSON *d = cJSON_AddObjectToObject(o, "detectable_change_pct");
    if (d) {
        char method[600];
        method_text(ru, method, sizeof method);
        cJSON_AddItemToObject(d, "median", num(a->median));
        cJSON_AddItemToObject(d, "largest", num(a->largest));
        char largest[600] = "";
        if (a->largest_row >= 0) cell_name(&rows[a->largest_row], largest, sizeof largest);
        add_text(d, "largest_cell", largest);
        cJSON_AddNumberToObject(d, "cells", a->n_detect);
        cJSON_AddStringToObject(d, "definition", method);
    }
    cJSON *cells = cJSON_AddArrayToObject(o, "cells");
    for (int i = 0; cells && i < nr; i++) {
        if (!isfinite(a->detect[i])) continue;
        const kh_cmp_row *r = &rows[i];
        cJSON *c = kh_cmp_json_cell(cells, r->task, r->base);
        if (!c) break;
        cJSON_AddStringToObject(c, "verdict", kh_verdict_name[r->v]);
        cJSON_AddItemToObject(c, "verdict_halfwidth_pct", num(r->halfwidth));
        cJSON_AddItemToObject(c, "detectable_slower_pct", num(a->slower[i]));
        cJSON_AddItemToObject(c, "detectable_faster_pct", num(a->faster[i]));
        cJSON_AddItemToObject(c, "detectable_change_pct", num(a->detect[i]));
    }
    return o;
}

void kh_aa_html(FILE *f, const kh_aa *a, int asked, const kh_cmp_row *rows, const kh_cmp_rule *ru) {
    aa_text t;
    texts(a, asked, rows, ru, &t);
    fprintf(f, "<section class=\"aa%s\"><h2>", a->same ? "" : " not-aa");
    kh_esc_xml(f, t.title);
    fputs("</h2>\n<p>", f);
    kh_esc_xml(f, t.lead);
    fputs("</p>\n<ul><li>", f);
    kh_esc_xml(f, t.rate);
    fputs(".</li><li>", f);
    kh_esc_xml(f, t.detect);
    fputs("; ", f);
    kh_esc_xml(f, t.method);
    fputs(".</li></ul></section>\n", f);
}
