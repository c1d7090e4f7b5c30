/* core/results/report/report_html.c — `khost report DIR --html FILE`: one self-contained page (inline CSS, SVG and a few
 * lines of script; nothing loaded from the network or from other files). Per task: the accuracy and time
 * tables (time as the median over repetitions with its CI and the factor's CI, GFLOP/s and the fraction of
 * the roofline, and the model-compile time beside it where the records have one, its split as the cell's
 * title), accuracy across seeds and epochs to target where cells have several seeds (report_seeds.c), the
 * time-per-step table, measurement warnings and a strip plot of the per-step samples
 * (report_strip.c), a chart of time per epoch per backend and
 * device, the learning curves per epoch, the original benchmark's published figures beside ours, the
 * environment of every cell, and the cells that did not finish with their reasons. Reference rows
 * (tools/reference's PyTorch / Keras 3 records) are marked as such. The markup is well-formed XML as well as
 * HTML, so both an HTML parser and an XML parser can check it (tests/report_html). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "results/report/report.h"

static const char *const palette[] = {"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00",
                                      "#7f7f7f", "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#9c755f"};
#define N_PALETTE (sizeof palette / sizeof palette[0])

static int is_ok(const kh_cell_record *r) { return r && !strcmp(r->status, "ok"); }

/* A table row up to its header cell: the backend, marked when its records are a reference run's. */
static void row_start(FILE *f, const kh_report_task *t, int p) {
    const kh_cell_record *any = NULL;
    for (int d = 0; d < t->nd && !any; d++) any = t->cells[p * t->nd + d];
    fputs("<tr><th>", f);
    kh_esc_xml(f, t->plugins[p]);
    if (any && kh_report_is_reference(any)) fputs(" <span class=\"ref\">(reference)</span>", f);
    fputs("</th>", f);
}

/* A cell without a figure: the run's status when it failed, "n/a" when it ran, empty where there was none. */
static void dnf_cell(FILE *f, const kh_cell_record *r) {
    fputs("<td class=\"dnf\">", f);
    kh_esc_xml(f, r ? (is_ok(r) ? "n/a" : r->status) : "");
    fputs("</td>", f);
}

/* How a compile time splits (the backend's compile_info), for a cell's tooltip and the environment table;
 * empty when the record does not say. */
static void compile_detail(const kh_cell_record *r, char *buf, size_t n) {
    buf[0] = 0;
    if (!r || !r->compile_cache[0]) return;
    size_t k = (size_t)snprintf(buf, n, "cache %s", r->compile_cache);
    if (k < n && r->compile_units >= 0)
        k += (size_t)snprintf(buf + k, n - k, ", %d generated unit%s", r->compile_units, r->compile_units == 1 ? "" : "s");
    const struct { const char *what; double v; } part[] = {
        {"codegen", r->compile_codegen_s}, {"C compiler / NVRTC", r->compile_cc_s}, {"load", r->compile_load_s}};
    for (size_t i = 0; i < 3 && k < n; i++)
        if (isfinite(part[i].v)) k += (size_t)snprintf(buf + k, n - k, "; %s %.3g s", part[i].what, part[i].v);
}

static void compile_cell(FILE *f, const kh_cell_record *r) {
    char text[96], detail[256];
    kh_report_fmt_compile(r, text, sizeof text);
    compile_detail(r, detail, sizeof detail);
    fputs("<td class=\"compile\"", f);
    if (detail[0]) {
        fputs(" title=\"", f);
        kh_esc_xml(f, detail);
        fputs("\"", f);
    }
    fputs(">", f);
    kh_esc_xml(f, text);
    fputs("</td>", f);
}

static void tables(FILE *f, const kh_report_task *t) {
    const char *metric = NULL;
    for (int i = 0; i < t->np * t->nd && !metric; i++)
        if (t->cells[i] && t->cells[i]->metric[0]) metric = t->cells[i]->metric;
    if (!metric) metric = "val_acc";
    fprintf(f, "<table class=\"accuracy\"><caption>%s</caption>\n",
            !strcmp(metric, "loss") ? "Training loss (lower is better)" : "Validation accuracy (val_acc)");
    kh_report_html_head(f, t, "backend");
    fputs("<tbody>\n", f);
    for (int p = 0; p < t->np; p++) {
        row_start(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (is_ok(r) && isfinite(r->metric_value)) fprintf(f, "<td>%.4f</td>", r->metric_value);
            else dnf_cell(f, r);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);

    /* a column of different machines or builds (reported only with --mixed), before the times it qualifies */
    for (int d = 0; d < t->nd; d++) {
        char list[2048];
        int what = kh_report_mixed(t, d, list, sizeof list);
        if (what <= 0) continue;
        fputs("<p class=\"mixed\"><strong>Mixed:</strong> the ", f);
        kh_esc_xml(f, t->devices[d]);
        fprintf(f, " column holds records from %s (", kh_report_mixed_what(what));
        kh_esc_xml(f, list);
        fputs("): its times and factors do not compare the backends.</p>\n", f);
    }
    /* the FP32 math of each column (--math), before the times it qualifies */
    char math[512];
    int any_math = 0;
    for (int d = 0; d < t->nd; d++) {
        int mixed = kh_report_math(t, d, math, sizeof math);
        if (!math[0]) continue;
        fputs(any_math++ ? "; " : "<p class=\"math\">FP32 math: ", f);
        kh_esc_xml(f, t->devices[d]);
        fputs(" = ", f);
        if (mixed) fputs("<strong>", f);
        kh_esc_xml(f, math);
        if (mixed) fputs("</strong> (times do not compare the backends at one precision)", f);
    }
    if (any_math) fputs("</p>\n", f);

    int any_compile = 0;
    for (int d = 0; d < t->nd; d++) any_compile |= kh_report_has_compile(t, d);
    fprintf(f, "<table class=\"time\"><caption>Time per epoch (s, median over repetitions of each repetition's mean "
               "over all epochs [95 %% bootstrap CI]; factor to the fastest on each device [95 %% CI, paired by round; "
               "\xe2\x89\x88 = not significant]), achieved GFLOP/s and fraction of the roofline%s</caption>\n",
            any_compile ? "; model-compile time (s, cold / warm)" : "");
    fputs("<thead><tr><th>backend</th>", f);
    for (int d = 0; d < t->nd; d++) {
        fputs("<th>", f);
        kh_esc_xml(f, t->devices[d]);
        fputs("</th>", f);
        if (kh_report_has_compile(t, d)) {
            fputs("<th class=\"compile\">", f);
            kh_esc_xml(f, t->devices[d]);
            fputs(" compile cold/warm</th>", f);
        }
    }
    fputs("</tr></thead>\n<tbody>\n", f);
    for (int p = 0; p < t->np; p++) {
        row_start(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!is_ok(r) || !isfinite(r->mean_epoch_s) || r->mean_epoch_s <= 0) {
                dnf_cell(f, r);
                if (kh_report_has_compile(t, d)) compile_cell(f, r);
                continue;
            }
            char s[256];
            kh_report_fmt_time_cell(t, p, d, 0, s, sizeof s);
            size_t sl = strlen(s);
            int best = sl > 4 && !strncmp(s, "**", 2) && !strcmp(s + sl - 2, "**"); /* markdown bold: the fastest */
            if (best) {
                memmove(s, s + 2, sl - 4);
                s[sl - 4] = 0;
            }
            fprintf(f, "<td%s>", best ? " class=\"best\"" : "");
            kh_esc_xml(f, s);
            if (isfinite(r->gflops)) {
                fputs("<br/><span class=\"gflops\" title=\"", f);
                kh_esc_xml(f, r->peak_source);
                fprintf(f, "\">%.3g GFLOP/s", r->gflops);
                if (isfinite(r->roofline_fraction) && r->roofline_level[0])
                    fprintf(f, ", %.1f%% of the %s roofline", 100 * r->roofline_fraction, r->roofline_level);
                else if (isfinite(r->roofline_fraction)) fprintf(f, ", %.1f%% of roofline", 100 * r->roofline_fraction);
                fputs("</span>", f);
            }
            fputs("</td>", f);
            if (kh_report_has_compile(t, d)) compile_cell(f, r);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    if (any_compile) {
        fputs("<p class=\"compile-note\">", f);
        kh_esc_xml(f, kh_report_compile_note);
        fputs("</p>\n", f);
    }
}

// --- charts ----------------------------------------------------------------------------------------------
/* Horizontal bars of time per epoch (the tables' median over repetitions), a whisker over its 95 % CI where
 * the cell was repeated, one per finished (backend, device); log axis past a 20x span. */
static void time_chart(FILE *f, const kh_report_task *t) {
    int n = 0;
    double lo = INFINITY, hi = 0;
    kh_ci ci;
    for (int i = 0; i < t->np * t->nd; i++) {
        double v = kh_report_cell_time(t, i, 0, &ci);
        if (!(v > 0)) continue;
        n++;
        double top = isfinite(ci.hi) && ci.hi > v ? ci.hi : v;
        if (v < lo) lo = v;
        if (top > hi) hi = top;
    }
    if (!n) {
        fputs("<p class=\"nochart\">No finished cell: no time chart.</p>\n", f);
        return;
    }
    int logx = hi / lo > 20;
    double x0 = logx ? floor(log10(lo)) : 0, x1 = logx ? ceil(log10(hi)) : hi * 1.1;
    if (x1 <= x0) x1 = x0 + 1;
    const int left = 230, width = 460, bar = 18, gap = 6, top = 10;
    int h = top + n * (bar + gap) + 30;
    fprintf(f, "<figure><svg class=\"chart time-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" role=\"img\"><title>Time per epoch (s%s)</title>\n",
            left + width + 80, h, left + width + 80, h, logx ? ", log axis" : "");
    int k = 0;
#define XPOS(v) (((logx ? log10(v) : (v)) - x0) / (x1 - x0) * width)
    for (int p = 0; p < t->np; p++)
        for (int d = 0; d < t->nd; d++) {
            double v = kh_report_cell_time(t, p * t->nd + d, 0, &ci);
            if (!(v > 0)) continue;
            double w = XPOS(v);
            if (w < 1) w = 1;
            int y = top + k * (bar + gap);
            char s[32];
            kh_report_fmt_seconds(v, s, sizeof s);
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", left - 6, y + 13);
            kh_esc_xml(f, t->plugins[p]);
            fputs(" @ ", f);
            kh_esc_xml(f, t->devices[d]);
            fprintf(f, "</text><rect class=\"bar\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>",
                    left, y, w, bar, palette[(size_t)p % N_PALETTE]);
            double tx = left + w + 4;
            if (isfinite(ci.lo) && isfinite(ci.hi) && ci.lo > 0) { /* the interval as a whisker across the bar's end */
                double a = left + XPOS(ci.lo), b = left + XPOS(ci.hi);
                fprintf(f, "<line class=\"ci\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#222\"/>"
                           "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#222\"/>"
                           "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#222\"/>",
                        a, y + bar / 2, b, y + bar / 2, a, y + 4, a, y + bar - 4, b, y + 4, b, y + bar - 4);
                if (b + 4 > tx) tx = b + 4;
            }
            fprintf(f, "<text x=\"%.1f\" y=\"%d\">%s s</text>\n", tx, y + 13, s);
            k++;
        }
#undef XPOS
    int ya = top + n * (bar + gap);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>", left, ya, left + width, ya);
    fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.3g s</text>\n", left,
            ya + 16, logx ? "" : "0", left + width, ya + 16, logx ? pow(10, x1) : x1);
    fputs("</svg><figcaption>Time per epoch per backend and device: the median over repetitions; the whisker is its "
          "95 % bootstrap CI (repeated cells only)</figcaption></figure>\n", f);
}

/* Learning curves: the task's metric per epoch, one line per cell with epochs. */
static void curve_chart(FILE *f, const kh_report_task *t) {
    const char *metric = "val_acc";
    for (int i = 0; i < t->np * t->nd; i++)
        if (t->cells[i] && t->cells[i]->metric[0]) metric = t->cells[i]->metric;
    int is_loss = !strcmp(metric, "loss");
    double lo = INFINITY, hi = -INFINITY;
    int max_ep = 0, series = 0;
    for (int i = 0; i < t->np * t->nd; i++) {
        const kh_cell_record *r = t->cells[i];
        if (!r || r->n_rows == 0) continue;
        int any = 0;
        for (int e = 0; e < r->n_rows; e++) {
            double v = is_loss ? r->rows[e].loss : r->rows[e].val_acc;
            if (!isfinite(v)) continue;
            any = 1;
            if (v < lo) lo = v;
            if (v > hi) hi = v;
            if (r->rows[e].epoch > max_ep) max_ep = r->rows[e].epoch;
        }
        series += any;
    }
    if (!series) {
        fputs("<p class=\"nochart\">No epoch recorded: no learning curves.</p>\n", f);
        return;
    }
    if (hi - lo < 1e-9) lo -= 0.05, hi += 0.05;
    if (max_ep < 2) max_ep = 2;
    const int left = 60, top = 10, width = 460, height = 220;
    fprintf(f, "<figure><svg class=\"chart curve-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" role=\"img\"><title>%s per epoch</title>\n",
            left + width + 220, top + height + 40, left + width + 220, top + height + 40, metric);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", left, top, width,
            height);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.4g</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.4g</text>\n",
            left - 4, top + 10, hi, left - 4, top + height, lo);
    fprintf(f, "<text x=\"%d\" y=\"%d\">epoch 1</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%d</text>\n", left,
            top + height + 16, left + width, top + height + 16, max_ep);
    int k = 0;
    for (int p = 0; p < t->np; p++)
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!r || r->n_rows == 0) continue;
            const char *col = palette[(size_t)k % N_PALETTE];
            fprintf(f, "<polyline class=\"curve\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
            int pts = 0;
            for (int e = 0; e < r->n_rows; e++) {
                double v = is_loss ? r->rows[e].loss : r->rows[e].val_acc;
                if (!isfinite(v)) continue;
                double x = left + (double)(r->rows[e].epoch - 1) / (max_ep - 1) * width;
                double y = top + (hi - v) / (hi - lo) * height;
                fprintf(f, "%s%.1f,%.1f", pts++ ? " " : "", x, y);
            }
            fputs("\"/>", f);
            if (pts == 1) { /* one epoch: a dot, a line needs two points */
                double v = NAN;
                for (int e = 0; e < r->n_rows && !isfinite(v); e++) v = is_loss ? r->rows[e].loss : r->rows[e].val_acc;
                fprintf(f, "<circle cx=\"%d\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>", left, top + (hi - v) / (hi - lo) * height,
                        col);
            }
            if (pts) {
                int ly = top + 12 + k * 16;
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"4\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">",
                        left + width + 10, ly - 4, col, left + width + 28, ly);
                kh_esc_xml(f, t->plugins[p]);
                fputs(" @ ", f);
                kh_esc_xml(f, t->devices[d]);
                fputs("</text>\n", f);
                k++;
            }
        }
    fprintf(f, "</svg><figcaption>Learning curves: %s per epoch</figcaption></figure>\n", metric);
}

// --- published, environment, unfinished ------------------------------------------------------------------
static void published(FILE *f, const kh_task_info *info) {
    if (!info || !KH_HAS_MEMBER(kh_task_info, info->struct_size, published) || info->n_published <= 0 ||
        !info->published) {
        fputs("<p class=\"published none\">The original benchmark published no figures for this task (or its "
              "module is not installed).</p>\n", f);
        return;
    }
    fprintf(f, "<table class=\"published\"><caption>Published by the Keras backend benchmark (%s / s per epoch)"
               "</caption>\n<thead><tr><th>backend</th><th>device</th><th>%s</th><th>s per epoch</th></tr></thead><tbody>\n",
            info->metric ? info->metric : "metric", info->metric ? info->metric : "metric");
    for (int i = 0; i < info->n_published; i++) {
        const kh_published *p = &info->published[i];
        if (!p->backend || !p->device) continue;
        fputs("<tr><th>", f);
        kh_esc_xml(f, p->backend);
        fputs("</th><td>", f);
        kh_esc_xml(f, p->device);
        if (p->metric >= 0) fprintf(f, "</td><td>%.4f", p->metric);
        else fputs("</td><td>-", f);
        if (p->s_per_epoch >= 0) fprintf(f, "</td><td>%.1f</td></tr>\n", p->s_per_epoch);
        else fputs("</td><td>-</td></tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

static void environment(FILE *f, const kh_report_task *t) {
    fputs("<details class=\"environment\"><summary>Environment of each cell</summary>\n", f);
    for (int p = 0; p < t->np; p++)
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!r) continue;
            fputs("<table class=\"env\"><caption>", f);
            kh_esc_xml(f, r->plugin);
            fputs(" @ ", f);
            kh_esc_xml(f, r->device);
            fputs("</caption><tbody>\n", f);
            fprintf(f, "<tr><th>epochs / batch / seed</th><td>%d / %d / %llu</td></tr>\n", r->n_rows, r->batch_size,
                    (unsigned long long)r->seed);
            if (r->math[0]) {
                fputs("<tr><th>FP32 math</th><td>", f);
                kh_report_esc_note(f, r->math, " (", r->math_note, ")");
                fputs("</td></tr>\n", f);
            }
            if (isfinite(r->flops_per_epoch))
                fprintf(f, "<tr><th>FLOPs per epoch</th><td>%.4g</td></tr>\n", r->flops_per_epoch);
            if (isfinite(r->compile_s)) {
                char text[96], detail[256];
                kh_report_fmt_compile(r, text, sizeof text);
                compile_detail(r, detail, sizeof detail);
                fputs("<tr><th>compile (s)</th><td>", f);
                kh_esc_xml(f, text);
                if (detail[0]) {
                    fputs(" (", f);
                    kh_esc_xml(f, detail);
                    fputs(")", f);
                }
                fputs("</td></tr>\n", f);
            }
            if (r->peak_source[0]) {
                fputs("<tr><th>peak</th><td>", f);
                if (isfinite(r->peak_gflops)) fprintf(f, "%.4g GFLOP/s", r->peak_gflops);
                if (isfinite(r->peak_gbps)) fprintf(f, ", %.4g GB/s", r->peak_gbps);
                fputs(" — ", f);
                kh_esc_xml(f, r->peak_source);
                fputs("</td></tr>\n", f);
            }
            for (int i = 0; i < r->n_env; i++) {
                fputs("<tr><th>", f);
                kh_esc_xml(f, r->env_key[i]);
                fputs("</th><td>", f);
                kh_esc_xml(f, r->env_val[i]);
                fputs("</td></tr>\n", f);
            }
            fputs("</tbody></table>\n", f);
        }
    fputs("</details>\n", f);
}

static void unfinished(FILE *f, const kh_report_task *t) {
    int any = 0;
    for (int p = 0; p < t->np; p++)
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!r || is_ok(r)) continue;
            if (!any) fputs("<h3>Did not finish</h3>\n<ul class=\"dnf\">\n", f);
            any = 1;
            fputs("<li><b>", f);
            kh_esc_xml(f, t->plugins[p]);
            fputs("</b> on ", f);
            kh_esc_xml(f, t->devices[d]);
            fputs(": ", f);
            size_t sl = strlen(r->status);
            if (!(r->reason[0] && !strncmp(r->reason, r->status, sl) && r->reason[sl] == ':')) {
                kh_esc_xml(f, r->status);
                if (r->reason[0]) fputs(": ", f);
            }
            kh_esc_xml(f, r->reason);
            fputs("</li>\n", f);
        }
    if (any) fputs("</ul>\n", f);
}

static const char css[] =
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1500px;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "thead th,tbody th{text-align:left;background:#f4f4f4}caption{text-align:left;font-weight:600;padding:4px 0}table.accuracy,table.time{min-width:28em}"
    ".row{display:flex;flex-wrap:wrap;gap:2em;align-items:flex-start}"
    "td.best{font-weight:700}td.dnf{color:#a00;text-align:center}.factor,.gflops{color:#666;font-size:90%}"
    "td.compile,th.compile{color:#444;font-size:90%}.compile-note{color:#555;font-size:90%;max-width:60em}"
    ".ref{color:#666;font-style:italic}svg text{font-size:12px;fill:#222}figure{margin:1em 0}"
    "section.task{border-top:2px solid #ddd;margin-top:2em}details{margin:1em 0}"
    "p.mixed{background:#fff0c2;padding:.4em .6em;max-width:60em}";

/* Marks the page as fully scripted; the browser test checks the mark, so a script error cannot pass. */
static const char script[] =
    "document.documentElement.setAttribute('data-ready',"
    "String(document.querySelectorAll('section.task').length));";

int kh_report_html(const kh_report *rep, kh_report_info_fn info_of, void *ctx, void (*extra)(FILE *, void *),
                   void *extra_ctx, const char *path, char *err, size_t errlen) {
    kh_memfile m;
    FILE *f = kh_memfile_open(&m, path, err, errlen);
    if (!f) return -1;
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>khost benchmark report</title>"
               "<style>%s</style></head>\n<body>\n<h1>khost benchmark report</h1>\n<nav><ul>", css);
    for (int i = 0; i < rep->n_tasks; i++) {
        fputs("<li><a href=\"#task-", f);
        kh_esc_xml(f, rep->tasks[i].name);
        fputs("\">", f);
        kh_esc_xml(f, rep->tasks[i].name);
        fputs("</a></li>", f);
    }
    fputs("</ul></nav>\n<p>Time per epoch is wall time from epoch start to the end of its validation pass, after "
          "synchronising the device. GFLOP/s counts forward, backward and optimizer work of the model spec "
          "(docs/PERFORMANCE.md); the roofline is min(peak FLOP/s, intensity x bandwidth) of the device. "
          "Rows marked (reference) are PyTorch / Keras 3 runs of tools/reference, not khost backends.</p>\n", f);
    for (int i = 0; i < rep->n_tasks; i++) {
        const kh_report_task *t = &rep->tasks[i];
        fputs("<section class=\"task\" id=\"task-", f);
        kh_esc_xml(f, t->name);
        fputs("\"><h2>", f);
        kh_esc_xml(f, t->name);
        fputs("</h2>\n", f);
        fputs("<div class=\"row\"><div>", f);
        tables(f, t);
        kh_report_html_seeds(f, t);
        kh_report_html_steps(f, t);
        kh_report_html_strips(f, t);
        fputs("</div><div>", f);
        published(f, info_of ? info_of(ctx, t->name) : NULL);
        fputs("</div></div>\n<div class=\"row\">", f);
        time_chart(f, t);
        curve_chart(f, t);
        fputs("</div>\n", f);
        unfinished(f, t);
        environment(f, t);
        fputs("</section>\n", f);
    }
    if (extra) extra(f, extra_ctx);
    fprintf(f, "<script>%s</script>\n</body></html>\n", script);
    return kh_memfile_write(&m, f, path, err, errlen);
}
