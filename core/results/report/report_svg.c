/* core/results/report/report_svg.c — `khost report --svg FILE`: time per epoch as a grouped bar chart, one group per task
 * and one bar per plugin x device (a colour each, with a legend). Self-contained SVG (no scripts, fonts or
 * external references), written atomically. Tasks differ by orders of magnitude (fastText seconds, LSTMs
 * minutes), so the axis turns logarithmic when the values span more than 20x; a linear axis would flatten
 * every short task to nothing.
 */
#define _GNU_SOURCE /* open_memstream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "results/report/report.h"

/* Colour-blind-safe palette (Okabe-Ito, then Tableau) — series beyond it repeat colours. */
static const char *const palette[] = {"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00",
                                      "#f0e442", "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f"};
#define N_PALETTE (sizeof palette / sizeof palette[0])

typedef struct series { const char *plugin, *device; } series;

static int find_series(const series *v, int n, const char *p, const char *d) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i].plugin, p) && !strcmp(v[i].device, d)) return i;
    return -1;
}

static int cmp_series(const void *a, const void *b) {
    const series *x = a, *y = b;
    int c = strcmp(x->plugin, y->plugin);
    return c ? c : kh_report_cmp_device(x->device, y->device);
}

static int bar_ok(const kh_cell_record *r) {
    return r && !strcmp(r->status, "ok") && isfinite(r->mean_epoch_s) && r->mean_epoch_s > 0;
}

/* Smallest of 1, 2, 2.5, 5 x 10^k that is >= v. */
static double nice_ceil(double v) {
    double e = pow(10, floor(log10(v)));
    static const double steps[] = {1, 2, 2.5, 5, 10};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (steps[i] * e >= v * (1 - 1e-12)) return steps[i] * e;
    return 10 * e;
}

int kh_report_svg(const kh_report *rep, const char *path, char *err, size_t errlen) {
    /* Series: every plugin x device that has a record, in table order. */
    int cap = rep->n_recs > 0 ? rep->n_recs : 1, ns = 0;
    series *sv = calloc((size_t)cap, sizeof *sv);
    int *slots = calloc((size_t)(rep->n_tasks > 0 ? rep->n_tasks : 1), sizeof *slots);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    double *gw = NULL; /* width of each task's group */
    if (!sv || !slots) goto oom;
    double lo = INFINITY, hi = 0;
    for (int t = 0; t < rep->n_tasks; t++) {
        const kh_report_task *k = &rep->tasks[t];
        for (int p = 0; p < k->np; p++)
            for (int d = 0; d < k->nd; d++) {
                const kh_cell_record *r = k->cells[p * k->nd + d];
                if (!r) continue;
                slots[t]++;
                if (find_series(sv, ns, k->plugins[p], k->devices[d]) < 0 && ns < cap)
                    sv[ns++] = (series){k->plugins[p], k->devices[d]};
                kh_ci ci;
                double v = bar_ok(r) ? kh_report_cell_time(k, p * k->nd + d, 0, &ci) : NAN;
                if (v > 0) {
                    if (v < lo) lo = v;
                    if ((isfinite(ci.hi) && ci.hi > v ? ci.hi : v) > hi) hi = isfinite(ci.hi) && ci.hi > v ? ci.hi : v;
                }
            }
    }
    if (ns > 1) qsort(sv, (size_t)ns, sizeof *sv, cmp_series);

    /* Geometry. */
    const double bar_w = 16, bar_gap = 2, group_pad = 28, left = 72, right = 20, top = 76, plot_h = 260;
    const double legend_item_w = 190, legend_row_h = 18;
    gw = calloc((size_t)(rep->n_tasks > 0 ? rep->n_tasks : 1), sizeof *gw);
    if (!gw) goto oom;
    double plot_w = 0;
    for (int t = 0; t < rep->n_tasks; t++) {
        double bars = slots[t] * (bar_w + bar_gap) - bar_gap;
        double label = 6.5 * (double)strlen(rep->tasks[t].name);
        gw[t] = (bars > label ? bars : label) + group_pad;
        plot_w += gw[t];
    }
    double width = left + plot_w + right;
    if (width < 520 && plot_w > 0) { /* a small report still gets a readable chart: widen the groups */
        for (int t = 0; t < rep->n_tasks; t++) gw[t] *= (520 - left - right) / plot_w;
        plot_w = 520 - left - right;
        width = 520;
    }
    int legend_cols = (int)((width - left) / legend_item_w);
    if (legend_cols < 1) legend_cols = 1;
    int legend_rows = (ns + legend_cols - 1) / legend_cols;
    double bottom = top + plot_h, height = bottom + 44 + legend_rows * legend_row_h + 12;

    /* Scale. */
    int logscale = 0, have = hi > 0;
    double dlo = 0, dhi = 1, ymax = 1;
    if (have && hi / lo > 20) {
        logscale = 1;
        dlo = floor(log10(lo));
        dhi = ceil(log10(hi));
        if (dhi <= dlo) dhi = dlo + 1;
    } else if (have) {
        ymax = nice_ceil(hi);
    }
#define YPOS(v) (logscale ? bottom - (log10(v) - dlo) / (dhi - dlo) * plot_h : bottom - (v) / ymax * plot_h)

    f = open_memstream(&buf, &len);
    if (!f) goto oom;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"11\">\n",
            width, height, width, height);
    fprintf(f, "<title>khost: time per epoch</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Time per epoch (s%s; median over "
               "repetitions, whisker: 95 %% CI; lower is better)</text>\n", left, logscale ? ", log scale" : "");

    /* Axis, grid and tick labels. */
    fprintf(f, "<g stroke=\"#dddddd\" stroke-width=\"1\">\n");
    if (logscale) {
        for (double k = dlo; k <= dhi + 1e-9; k++)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", left, YPOS(pow(10, k)),
                    left + plot_w, YPOS(pow(10, k)));
    } else {
        for (int i = 1; i <= 5; i++)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", left, YPOS(ymax * i / 5),
                    left + plot_w, YPOS(ymax * i / 5));
    }
    fprintf(f, "</g>\n<g text-anchor=\"end\" fill=\"#333333\">\n");
    if (logscale) {
        for (double k = dlo; k <= dhi + 1e-9; k++)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%g</text>\n", left - 6, YPOS(pow(10, k)) + 4, pow(10, k));
    } else {
        for (int i = 0; i <= 5; i++)
            fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">%g</text>\n", left - 6, YPOS(ymax * i / 5) + 4, ymax * i / 5);
    }
    fprintf(f, "</g>\n");
    fprintf(f, "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">seconds per epoch</text>\n",
            top + plot_h / 2);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\"/>\n", left, top, left, bottom);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333333\"/>\n", left, bottom,
            left + plot_w, bottom);
    if (!have)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#888888\">no finished cells</text>\n",
                left + plot_w / 2, top + plot_h / 2);

    /* Groups. */
    double x0 = left;
    for (int t = 0; t < rep->n_tasks; t++) {
        const kh_report_task *k = &rep->tasks[t];
        double bars = slots[t] * (bar_w + bar_gap) - bar_gap;
        double x = x0 + (gw[t] - bars) / 2;
        fprintf(f, "<g>\n");
        for (int s = 0; s < ns; s++) {
            int p = -1, d = -1;
            for (int i = 0; i < k->np; i++)
                if (!strcmp(k->plugins[i], sv[s].plugin)) p = i;
            for (int i = 0; i < k->nd; i++)
                if (!strcmp(k->devices[i], sv[s].device)) d = i;
            const kh_cell_record *r = p >= 0 && d >= 0 ? k->cells[p * k->nd + d] : NULL;
            if (!r) continue;
            kh_ci ci;
            double tv = bar_ok(r) ? kh_report_cell_time(k, p * k->nd + d, 0, &ci) : NAN;
            if (tv > 0) {
                double y = YPOS(tv);
                if (y > bottom - 1) y = bottom - 1; /* a value at the bottom of the scale stays visible */
                char v[32];
                kh_report_fmt_seconds(tv, v, sizeof v);
                fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x, y,
                        bar_w, bottom - y, palette[s % N_PALETTE]);
                kh_esc_xml(f, k->name);
                fputs(": ", f);
                kh_esc_xml(f, sv[s].plugin);
                fputs(" on ", f);
                kh_esc_xml(f, sv[s].device);
                fprintf(f, ", %s s per epoch</title></rect>\n", v);
                double ytext = y;
                if (isfinite(ci.lo) && isfinite(ci.hi) && ci.lo > 0) { /* the 95 % CI as a whisker */
                    double ya = YPOS(ci.hi), yb = YPOS(ci.lo), xm = x + bar_w / 2;
                    if (yb > bottom) yb = bottom;
                    fprintf(f, "<path d=\"M%.1f %.1fV%.1fM%.1f %.1fH%.1fM%.1f %.1fH%.1f\" stroke=\"#222222\" fill=\"none\"/>\n",
                            xm, ya, yb, xm - 4, ya, xm + 4, xm - 4, yb, xm + 4);
                    if (ya < ytext) ytext = ya;
                }
                fprintf(f, "<text transform=\"translate(%.1f %.1f) rotate(-90)\" font-size=\"9\">%s</text>\n",
                        x + bar_w / 2 + 3, ytext - 3, v);
            } else { /* did not finish: a grey mark where the bar would be, the reason on hover */
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#999999\">x<title>", x + bar_w / 2,
                        bottom - 4);
                kh_esc_xml(f, sv[s].plugin);
                fputs(" on ", f);
                kh_esc_xml(f, sv[s].device);
                fputs(": ", f);
                kh_report_esc_note(f, r->status, ": ", r->reason, "");
                fputs("</title></text>\n", f);
            }
            x += bar_w + bar_gap;
        }
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x0 + gw[t] / 2, bottom + 18);
        kh_esc_xml(f, k->name);
        fprintf(f, "</text>\n</g>\n");
        x0 += gw[t];
    }

    /* Legend. */
    for (int s = 0; s < ns; s++) {
        double lx = left + (s % legend_cols) * legend_item_w, ly = bottom + 40 + (s / legend_cols) * legend_row_h;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\"/>", lx, ly - 10,
                palette[s % N_PALETTE]);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", lx + 17, ly);
        kh_esc_xml(f, sv[s].plugin);
        fputs(" on ", f);
        kh_esc_xml(f, sv[s].device);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
#undef YPOS
    if (fclose(f) != 0) {
        f = NULL;
        goto oom;
    }
    f = NULL;
    int rc = kh_write_atomic(path, buf, len, err, errlen);
    free(buf);
    free(gw);
    free(sv);
    free(slots);
    return rc;
oom:
    if (f) fclose(f);
    free(buf);
    free(gw);
    free(sv);
    free(slots);
    snprintf(err, errlen, "%s: out of memory while drawing the chart", path);
    return -1;
}
