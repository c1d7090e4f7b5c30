/* core/results/report/report_roofline.c — where each finished cell sits under its roofline: the epoch's
 * arithmetic intensity (FLOPs / compulsory bytes), the training step's working set, the memory level holding it
 * and that level's ceiling, the bound and the achieved GFLOP/s (docs/PERFORMANCE.md, "GFLOP/s and the
 * roofline"). Only for records that name their level: older ones were held to DRAM's alone. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "results/report/report.h"

static int has_level(const kh_cell_record *r) {
    return r && !strcmp(r->status, "ok") && r->roofline_level[0] && isfinite(r->gflops) &&
           isfinite(r->roofline_gflops) && r->bytes_per_epoch > 0;
}

static void fmt_bytes(double b, char *buf, size_t n) {
    if (!isfinite(b)) snprintf(buf, n, "—");
    else if (b >= 1e9) snprintf(buf, n, "%.3g GB", b / 1e9);
    else if (b >= 1e6) snprintf(buf, n, "%.3g MB", b / 1e6);
    else snprintf(buf, n, "%.3g kB", b / 1e3);
}

void kh_report_roofline_points(FILE *f, const kh_report_task *t) {
    int any = 0;
    for (int i = 0; i < t->np * t->nd; i++) any |= has_level(t->cells[i]);
    if (!any) return;
    fprintf(f, "\nRoofline points (intensity = FLOPs / compulsory bytes of the epoch; the training step's working "
               "set, the memory level holding it and that level's measured ceiling; bound = the epoch's FLOPs over "
               "its least time at those ceilings and the FLOP peak):\n\n"
               "| backend | device | FLOP/byte | working set | level | ceiling GB/s | peak GFLOP/s | bound GFLOP/s | "
               "achieved GFLOP/s | fraction |\n|---|---|---:|---:|---|---:|---:|---:|---:|---:|\n");
    for (int p = 0; p < t->np; p++)
        for (int d = 0; d < t->nd; d++) {
            const kh_cell_record *r = t->cells[p * t->nd + d];
            if (!has_level(r)) continue;
            char ws[32];
            fmt_bytes(r->step_working_set_bytes, ws, sizeof ws);
            fprintf(f, "| %s | %s | %.3g | %s | %s | %.1f | %.1f | %.3g | %.3g | %.3f |\n", t->plugins[p], t->devices[d],
                    r->flops_per_epoch / r->bytes_per_epoch, ws, r->roofline_level, r->roofline_gbps, r->peak_gflops,
                    r->roofline_gflops, r->gflops, r->roofline_fraction);
        }
}
