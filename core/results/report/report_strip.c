/* core/results/report/report_strip.c — the HTML report's distribution of per-step times: per task and device, a strip plot
 * with one row per backend, one dot per recorded step (all repetitions; the first KH_STRIP_MAX of a long
 * run, evenly thinned beyond) and a bar at the median of each repetition, so the spread within and between
 * repetitions is visible beside the tables. Nothing when no record of the task has samples. Also the
 * time-per-step table and the measurement warnings of the markdown report (report_stats.c), as HTML. */
#define _GNU_SOURCE /* open_memstream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "results/report/report.h"

#define KH_STRIP_MAX 2000 /* dots per backend: enough to show the shape, the page stays small */

static const char *const colour[] = {"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00"};

/* The repetitions' statistics of the cell (backend p, device d) when it finished; NULL for a cell without a
 * strip (not run, failed, or no statistics). */
static const kh_cell_stats *ok_stats(const kh_report_task *t, int p, int d) {
    const kh_cell_stats *s = t->stats ? t->stats[p * t->nd + d] : NULL;
    const kh_cell_record *r = t->cells[p * t->nd + d];
    return s && r && !strcmp(r->status, "ok") ? s : NULL;
}

void kh_report_html_strips(FILE *f, const kh_report_task *t) {
    for (int d = 0; d < t->nd; d++) {
        double lo = INFINITY, hi = 0;
        int rows = 0;
        for (int p = 0; p < t->np; p++) {
            const kh_cell_stats *s = ok_stats(t, p, d);
            if (!s) continue;
            int any = 0;
            for (int k = 0; k < s->n_reps; k++) {
                if (strcmp(s->reps[k].status, "ok")) continue;
                for (int i = 0; i < s->reps[k].n_steps; i++) {
                    double v = s->reps[k].steps[i];
                    if (v < lo) lo = v;
                    if (v > hi) hi = v;
                    any = 1;
                }
            }
            rows += any;
        }
        if (!rows || !(hi > 0)) continue;
        if (hi <= lo) hi = lo * 1.01 + 1e-9;
        const int W = 560, L = 130, R = 20, RH = 28, TOP = 10, H = TOP + rows * RH + 34;
        double span = hi - lo;
        fputs("<figure><svg class=\"chart strip-chart\" xmlns=\"http://www.w3.org/2000/svg\"", f);
        fprintf(f, " width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\"><title>Time per step on ", W, H, W, H);
        kh_esc_xml(f, t->devices[d]);
        fputs(" (ms), every recorded step</title>\n", f);
        int row = 0;
        for (int p = 0; p < t->np; p++) {
            const kh_cell_stats *s = ok_stats(t, p, d);
            if (!s) continue;
            int total = 0;
            for (int k = 0; k < s->n_reps; k++)
                if (!strcmp(s->reps[k].status, "ok")) total += s->reps[k].n_steps;
            if (!total) continue;
            int stride = total > KH_STRIP_MAX ? (total + KH_STRIP_MAX - 1) / KH_STRIP_MAX : 1;
            double y0 = TOP + row * RH;
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">", L - 6, y0 + RH / 2.0 + 4);
            kh_esc_xml(f, t->plugins[p]);
            fputs("</text>\n", f);
            const char *c = colour[row % (int)(sizeof colour / sizeof colour[0])];
            int seen = 0;
            for (int k = 0; k < s->n_reps; k++) {
                const kh_rep *rp = &s->reps[k];
                if (strcmp(rp->status, "ok")) continue;
                for (int i = 0; i < rp->n_steps; i++, seen++) {
                    if (seen % stride) continue;
                    double x = L + (rp->steps[i] - lo) / span * (W - L - R);
                    double jit = ((unsigned)(seen * 2654435761u) >> 24) / 255.0; /* fixed jitter: same page every time */
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\" fill-opacity=\"0.35\"/>\n", x,
                            y0 + 5 + jit * (RH - 10), c);
                }
                if (isfinite(rp->step_s)) {
                    double x = L + (rp->step_s - lo) / span * (W - L - R);
                    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-width=\"1.5\">"
                               "<title>repetition %d: median %.4g ms</title></line>\n",
                            x, x, y0 + 2, y0 + RH - 2, rp->index, 1000 * rp->step_s);
                }
            }
            row++;
        }
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n", L, W - R, TOP + rows * RH,
                TOP + rows * RH);
        for (int k = 0; k <= 4; k++) {
            double v = lo + span * k / 4, x = L + (W - L - R) * k / 4.0;
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">%.3g</text>\n", x,
                    TOP + rows * RH + 14, 1000 * v);
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"11\">ms per step</text>\n",
                (L + W - R) / 2, TOP + rows * RH + 30);
        fputs("</svg><figcaption>Time per step on ", f);
        kh_esc_xml(f, t->devices[d]);
        fputs(": one dot per recorded step, a bar at each repetition's median</figcaption></figure>\n", f);
    }
}

/* Each backend's time per step against the fastest reference row of its device, as the markdown's table. */
static void html_vs_reference(FILE *f, const kh_report_task *t) {
    if (!kh_report_has_vs_reference(t, -1)) return;
    fputs("<table class=\"time vsref\"><caption>", f);
    kh_esc_xml(f, kh_report_vs_reference_title);
    fputs("</caption>\n", f);
    kh_report_html_head(f, t, "backend");
    fputs("<tbody>\n", f);
    for (int p = 0; p < t->np; p++) {
        if (!kh_report_has_vs_reference(t, p)) continue;
        fputs("<tr><th>", f);
        kh_esc_xml(f, t->plugins[p]);
        fputs("</th>", f);
        for (int d = 0; d < t->nd; d++) {
            char cell[192];
            kh_report_fmt_vs_reference(t, p, d, cell, sizeof cell);
            fputs("<td>", f);
            kh_esc_xml(f, cell);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

/* The time-per-step table and the measurement warnings of the markdown report, as HTML. */
void kh_report_html_steps(FILE *f, const kh_report_task *t) {
    int any = 0;
    for (int i = 0; i < t->np * t->nd && !any; i++) {
        const kh_cell_stats *s = t->stats ? t->stats[i] : NULL;
        any = s && s->step.n > 0 && t->cells[i] && !strcmp(t->cells[i]->status, "ok");
    }
    if (any) {
        fputs("<table class=\"time steps\"><caption>Time per step (ms, median over repetitions of each repetition's "
              "median step [95 % bootstrap CI]; factor to the fastest on each device [95 % CI, paired by round; "
              "\xe2\x89\x88 = not significant])</caption>\n", f);
        kh_report_html_head(f, t, "backend");
        fputs("<tbody>\n", f);
        for (int p = 0; p < t->np; p++) {
            fputs("<tr><th>", f);
            kh_esc_xml(f, t->plugins[p]);
            fputs("</th>", f);
            for (int d = 0; d < t->nd; d++) {
                const kh_cell_stats *s = t->stats ? t->stats[p * t->nd + d] : NULL;
                const kh_cell_record *r = t->cells[p * t->nd + d];
                if (!r || strcmp(r->status, "ok") || !s || !s->step.n) {
                    fputs("<td class=\"dnf\">", f);
                    kh_esc_xml(f, !r ? "" : strcmp(r->status, "ok") ? r->status : "\xe2\x80\x94");
                    fputs("</td>", f);
                    continue;
                }
                char cell[256];
                kh_report_fmt_time_cell(t, p, d, 1, cell, sizeof cell);
                size_t n = strlen(cell);
                int best = n > 4 && !strncmp(cell, "**", 2) && !strcmp(cell + n - 2, "**");
                if (best) {
                    memmove(cell, cell + 2, n - 4);
                    cell[n - 4] = 0;
                }
                fprintf(f, "<td%s>", best ? " class=\"best\"" : "");
                kh_esc_xml(f, cell);
                fputs("</td>", f);
            }
            fputs("</tr>\n", f);
        }
        fputs("</tbody></table>\n", f);
        html_vs_reference(f, t);
        kh_report_print_protocol(f, t, 1); /* under it, as the markdown has it */
    }
    /* the warnings: the markdown list, one item per line */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return;
    kh_report_print_warnings(m, t);
    if (fclose(m) != 0 || !buf) {
        free(buf);
        return;
    }
    int listed = 0;
    for (char *line = buf, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (strncmp(line, "- ", 2)) continue;
        if (!listed) fputs("<p class=\"warnings\">Measurement warnings:</p>\n<ul class=\"warnings\">\n", f), listed = 1;
        fputs("<li>", f);
        kh_esc_xml(f, line + 2);
        fputs("</li>\n", f);
    }
    if (listed) fputs("</ul>\n", f);
    free(buf);
}
