/* core/results/report/report_protocol.c — how each row of a task with reference rows was timed: untimed warm-up
 * steps, timed steps per epoch and where a step ends (samples.step_sync), from its repetitions' records. A ratio
 * to a reference means something only when both rows were timed alike; the report says when they were not. */
#include <stdio.h>
#include <string.h>

#include "base/escape.h"
#include "results/report/report.h"

/* What the step boundaries of the records say, in words. */
static const char *boundary_words(const char *sync) {
    if (!strcmp(sync, "device")) return "when its work finished on the device";
    if (!strcmp(sync, "host-loss")) return "when its loss reached the host (inside Keras's fit)";
    if (!strcmp(sync, "none")) return "not synchronised (the host's dispatch)";
    return NULL;
}

/* Row p's protocol over its devices' finished repetitions: warm-up and timed steps (-1 unknown, -2 differ between
 * its cells or repetitions) and the step boundary ("" unknown, "varies" when its cells differ). 0 when the row has
 * no repetition with samples. */
typedef struct row_protocol {
    long long warmup, steps;
    char sync[16];
} row_protocol;

static void merge(long long *into, long long v, int first) {
    if (first) *into = v;
    else if (*into != v) *into = -2;
}

static int row_protocol_of(const kh_report_task *t, int p, row_protocol *rp) {
    int seen = 0;
    rp->warmup = rp->steps = -1, rp->sync[0] = 0;
    for (int d = 0; d < t->nd; d++) {
        const kh_cell_stats *s = t->stats ? t->stats[p * t->nd + d] : NULL;
        if (!s || s->step.n == 0) continue;
        for (int i = 0; i < s->n_reps; i++) {
            const kh_rep *r = &s->reps[i];
            if (strcmp(r->status, "ok") || r->n_steps == 0) continue;
            merge(&rp->warmup, r->set.warmup_steps, !seen);
            merge(&rp->steps, r->set.steps_per_epoch, !seen);
            seen = 1;
        }
        if (!rp->sync[0]) snprintf(rp->sync, sizeof rp->sync, "%s", s->step_sync);
        else if (strcmp(rp->sync, s->step_sync)) snprintf(rp->sync, sizeof rp->sync, "varies");
    }
    return seen;
}

static void fmt_count(long long v, char *buf, size_t n) {
    if (v >= 0) snprintf(buf, n, "%lld", v);
    else snprintf(buf, n, "%s", v == -2 ? "varies" : "not recorded");
}

/* One piece of text: escaped for the page (html) or the markdown. */
static void put(FILE *f, int html, const char *s) {
    if (html) kh_esc_xml(f, s);
    else kh_esc_md(f, s);
}

void kh_report_print_protocol(FILE *f, const kh_report_task *t, int html) {
    if (!kh_report_has_vs_reference(t, -1)) return;
    static const char title[] = "How each row was timed (untimed warm-up steps; timed steps per epoch; where a step ends)";
    long long warmup0 = 0, steps0 = 0; /* the first row's counts, which every other row's must match */
    int have = 0, differ = 0;
    if (html) fprintf(f, "<table class=\"protocol\"><caption>%s</caption>\n<thead><tr><th>row</th><th>warm-up</th>"
                         "<th>timed steps</th><th>a step ends</th></tr></thead><tbody>\n", title);
    else fprintf(f, "\n%s:\n\n| row | warm-up | timed steps | a step ends |\n| --- | ---: | ---: | --- |\n", title);
    for (int p = 0; p < t->np; p++) {
        row_protocol rp;
        if (!row_protocol_of(t, p, &rp)) continue;
        char w[24], s[24], sync[96];
        fmt_count(rp.warmup, w, sizeof w);
        fmt_count(rp.steps, s, sizeof s);
        const char *words = boundary_words(rp.sync);
        if (words) snprintf(sync, sizeof sync, "%s (%s)", words, rp.sync);
        else snprintf(sync, sizeof sync, "%s", rp.sync[0] ? rp.sync : "not recorded");
        if (html) {
            fputs("<tr><th>", f);
            kh_esc_xml(f, t->plugins[p]);
            fprintf(f, "</th><td>%s</td><td>%s</td><td>", w, s);
        } else {
            kh_report_md_label(f, t, p);
            fprintf(f, " %s | %s | ", w, s);
        }
        put(f, html, sync);
        fputs(html ? "</td></tr>\n" : " |\n", f);
        if (!have) warmup0 = rp.warmup, steps0 = rp.steps, have = 1;
        else differ |= rp.warmup != warmup0 || rp.steps != steps0 || rp.warmup < 0 || rp.steps < 0;
    }
    if (html) fputs("</tbody></table>\n", f);
    if (differ)
        fprintf(f, html ? "<p class=\"unlike\">%s</p>\n" : "\n**%s**\n",
                "The rows were not timed alike (warm-up or timed steps differ, or a record does not say): the ratios "
                "against the references compare unlike measurements; khost matrix --timing gives every row the same "
                "counts.");
}
