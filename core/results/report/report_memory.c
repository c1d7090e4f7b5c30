/* core/results/report/report_memory.c — the report's peak-memory table: per backend and device the cell
 * process's peak resident set (the kernel's account of the exited child under a matrix) and, where the
 * backend counts it (ABI 1.4 memory_info), the device memory its model held at the peak. */
#include <stdio.h>
#include <string.h>

#include "results/report/report.h"

static int is_ok(const kh_cell_record *r) { return r && !strcmp(r->status, "ok"); }

void kh_report_print_memory(FILE *f, const kh_report_task *t) {
    int any = 0, any_dev = 0;
    for (int i = 0; i < t->np * t->nd; i++) {
        const kh_cell_record *r = t->cells[i];
        any |= is_ok(r) && r->peak_rss_bytes > 0;
        any_dev |= is_ok(r) && r->dev_peak_bytes >= 0;
    }
    if (!any && !any_dev) return;
    const double mib = 1.0 / (1024.0 * 1024.0);
    fprintf(f, "\nPeak memory: the cell process's resident set%s:\n\n",
            any_dev ? "; + dev = the device memory the backend counted for its model (weights, arena, workspaces)" : "");
    kh_report_md_head(f, t);
    for (int p = 0; p < t->np; p++) {
        kh_report_md_label(f, t, p);
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!is_ok(r)) { /* the time tables say what happened to it */
                fprintf(f, " — |");
                continue;
            }
            if (r->peak_rss_bytes > 0) fprintf(f, " %.0f MiB", (double)r->peak_rss_bytes * mib);
            else fprintf(f, " —");
            if (r->dev_peak_bytes >= 0) fprintf(f, " + %.0f MiB dev", (double)r->dev_peak_bytes * mib);
            fprintf(f, " |");
        }
        fprintf(f, "\n");
    }
}
