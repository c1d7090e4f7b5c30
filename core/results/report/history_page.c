/* core/results/report/history_page.c — the history charts (results/history.h): `khost history --html` and report's page: self-contained, inline SVG, no script. */
#include <math.h>
#include <stdio.h>

#include "base/escape.h"
#include "results/history.h"

#define W 760
#define H 260
#define LEFT 70
#define RIGHT 20
#define TOP 20
#define BOTTOM 40

void kh_history_page_style(FILE *f) {
    fputs("<style>svg.history{background:#fafafa}.band{fill:#9cf;opacity:.45}.med{fill:none;stroke:#246;"
          "stroke-width:1.5}.pt{fill:#246}.level{stroke:#c60;stroke-width:2}.change{stroke:#a00;stroke-dasharray:4 3}"
          ".lab{font-size:11px}table.history{border-collapse:collapse;margin:.5em 0 2em}table.history td,"
          "table.history th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:right}"
          "table.history td.l{text-align:left}tr:target{background:#ffc}</style>\n",
          f);
}

void kh_history_page_intro(FILE *f, const char *src, int n_series, int n_records, double threshold_pct) {
    fputs("<p>", f);
    kh_esc_xml(f, src);
    fprintf(f, ": %d series from %d repetition record(s). A series is one backend × task × device on one machine "
               "(CPU model, ISA, device, driver); the band is each revision's 95 %% bootstrap CI, the orange lines "
               "the levels and the dashed lines the change points found by asv's step detection (threshold %g %%). "
               "A point links to its revision's row.</p>\n",
            n_series, n_records, threshold_pct);
}

void kh_history_page_begin(FILE *f, const char *src, int n_series, int n_records, double threshold_pct) {
    fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>khost history: ", f);
    kh_esc_xml(f, src);
    fputs("</title>\n<style>body{font:14px sans-serif;margin:2em;max-width:60em}</style>\n", f);
    kh_history_page_style(f);
    fputs("</head><body>\n<h1>khost history</h1>\n", f);
    kh_history_page_intro(f, src, n_series, n_records, threshold_pct);
}

static double ypos(double v, double lo, double hi) { return TOP + (H - TOP - BOTTOM) * (hi - v) / (hi - lo); }

void kh_history_page_series(FILE *f, const kh_hist_series *s, int index) {
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < s->n_revs; i++) {
        const kh_hist_rev *r = &s->revs[i];
        double a = isfinite(r->ci.lo) ? r->ci.lo : r->median, b = isfinite(r->ci.hi) ? r->ci.hi : r->median;
        lo = fmin(lo, a), hi = fmax(hi, b);
    }
    if (!(hi > lo)) lo = lo * 0.95, hi = hi * 1.05 + 1e-12;
    double pad = (hi - lo) * 0.08;
    lo -= pad, hi += pad;
    int n = s->n_revs;
    double dx = n > 1 ? (double)(W - LEFT - RIGHT) / (n - 1) : 0;
#define X(i) (LEFT + (n > 1 ? (i) * dx : (W - LEFT - RIGHT) / 2.0))
    fprintf(f, "<section class=\"series\" id=\"s%d\" data-changes=\"%d\"><h2>", index, s->n_changes);
    kh_esc_xml(f, s->task);
    fputs(" · ", f);
    kh_esc_xml(f, s->plugin);
    fputs(" · ", f);
    kh_esc_xml(f, s->device);
    fprintf(f, " (%s time)</h2>\n<p>machine: ", s->kind);
    kh_esc_xml(f, s->machine);
    fputs("; revisions in ", f);
    kh_esc_xml(f, s->order);
    fprintf(f, "</p>\n<svg class=\"history\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "role=\"img\">\n", W, H);
    fprintf(f, "<text class=\"lab\" x=\"4\" y=\"%d\">%.4g ms</text><text class=\"lab\" x=\"4\" y=\"%d\">%.4g ms</text>\n",
            TOP + 4, 1e3 * hi, H - BOTTOM, 1e3 * lo);
    fputs("<polygon class=\"band\" points=\"", f); /* the CI band: upper edge left to right, lower back */
    for (int i = 0; i < n; i++)
        fprintf(f, "%.1f,%.1f ", X(i), ypos(isfinite(s->revs[i].ci.hi) ? s->revs[i].ci.hi : s->revs[i].median, lo, hi));
    for (int i = n - 1; i >= 0; i--)
        fprintf(f, "%.1f,%.1f ", X(i), ypos(isfinite(s->revs[i].ci.lo) ? s->revs[i].ci.lo : s->revs[i].median, lo, hi));
    fputs("\"/>\n<polyline class=\"med\" points=\"", f);
    for (int i = 0; i < n; i++) fprintf(f, "%.1f,%.1f ", X(i), ypos(s->revs[i].median, lo, hi));
    fputs("\"/>\n", f);
    for (int j = 0; j < s->n_steps; j++) {
        const kh_step *st = &s->steps[j];
        double y = ypos(st->value, lo, hi);
        fprintf(f, "<line class=\"level\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>\n", X(st->left) - dx / 3,
                X(st->right - 1) + dx / 3, y, y);
    }
    for (int j = 0; j < s->n_changes; j++) {
        const kh_hist_change *c = &s->changes[j];
        double x = (X(c->after - 1) + X(c->after)) / 2;
        int right_half = x > W / 2.0; /* the label on the side with room */
        fprintf(f, "<line class=\"change\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\"/><text class=\"lab change-label\" "
                   "x=\"%.1f\" y=\"%d\" text-anchor=\"%s\">%+.1f %% %s</text>\n", x, x, TOP, H - BOTTOM,
                right_half ? x - 3 : x + 3, TOP + 12 + 12 * (j % 3), right_half ? "end" : "start", 100 * c->change,
                c->what);
    }
    for (int i = 0; i < n; i++) {
        const kh_hist_rev *r = &s->revs[i];
        fprintf(f, "<a href=\"#s%d-r%d\"><circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"><title>", index, i + 1,
                X(i), ypos(r->median, lo, hi));
        kh_esc_xml(f, r->name);
        fprintf(f, ": %.4g ms (n %d)</title></circle></a>\n", 1e3 * r->median, r->n);
    }
    fputs("</svg>\n", f);
    for (int j = 0; j < s->n_changes; j++)
        if (s->changes[j].confirm[0]) {
            fprintf(f, "<p class=\"confirm\">change after revision %d: ", s->changes[j].after);
            kh_esc_xml(f, s->changes[j].confirm);
            fputs("</p>\n", f);
        }
    fputs("<table class=\"history\"><tr><th>#</th><th>revision</th><th>first measured</th><th>n</th><th>median (ms)</th>"
          "<th>95 % CI (ms)</th><th>records</th></tr>\n", f);
    for (int i = 0; i < n; i++) {
        const kh_hist_rev *r = &s->revs[i];
        fprintf(f, "<tr id=\"s%d-r%d\"><td>%d</td><td class=\"l\">", index, i + 1, i + 1);
        kh_esc_xml(f, r->name);
        fputs("</td><td class=\"l\">", f);
        kh_esc_xml(f, r->first);
        fprintf(f, "</td><td>%d</td><td>%.4g</td><td>", r->n, 1e3 * r->median);
        if (isfinite(r->ci.lo)) fprintf(f, "%.4g … %.4g", 1e3 * r->ci.lo, 1e3 * r->ci.hi);
        else fputs("—", f);
        fputs("</td><td class=\"l\">", f);
        for (int k = 0; k < r->n; k++) {
            if (k) fputs("<br>", f);
            kh_esc_xml(f, r->where[k]);
        }
        fputs("</td></tr>\n", f);
    }
    fputs("</table></section>\n", f);
#undef X
}

void kh_history_page_end(FILE *f) { fputs("</body></html>\n", f); }
