/* core/cell/noise.c — the machine's load while a cell measured (noise.h). */
#define _GNU_SOURCE /* glob */
#include "cell/noise.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "khost/kit/clock.h"

static int read_line(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "re");
    int ok = f && fgets(buf, (int)n, f);
    if (f) fclose(f);
    if (!ok) return -1;
    buf[strcspn(buf, "\n")] = 0;
    return 0;
}

void kh_noise_before(kh_cell_record *r) {
    char buf[256];
    if (read_line("/proc/loadavg", buf, sizeof buf) == 0) {
        buf[strcspn(buf, " ")] = 0;
        kh_record_set_env(r, "noise_load1_before", buf);
    }
    if (read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", buf, sizeof buf) == 0)
        kh_record_set_env(r, "cpu_governor", buf);
    /* the current frequency: cpufreq's per-CPU figure where there is one, else /proc/cpuinfo's "cpu MHz" */
    double sum = 0;
    int n = 0;
    glob_t g;
    if (glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            if (read_line(g.gl_pathv[i], buf, sizeof buf) == 0 && atof(buf) > 0) sum += atof(buf) / 1000, n++;
        globfree(&g);
    }
    if (n == 0) {
        FILE *f = fopen("/proc/cpuinfo", "re");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            double mhz;
            if (sscanf(line, "cpu MHz : %lf", &mhz) == 1 && mhz > 0) sum += mhz, n++;
        }
        if (f) fclose(f);
    }
    if (n > 0) {
        snprintf(buf, sizeof buf, "%.0f", sum / n);
        kh_record_set_env(r, "cpu_mhz", buf);
    }
}

void kh_noise_after(kh_cell_record *r, const kh_noise *a, const kh_noise *b) {
    double others, steal;
    if (kh_cpuload_between(a, b, &others, &steal) != 0) return;
    char buf[32];
    snprintf(buf, sizeof buf, "%.3f", b->wall - a->wall);
    kh_record_set_env(r, "noise_window_s", buf);
    snprintf(buf, sizeof buf, "%.2f", others);
    kh_record_set_env(r, "noise_other_cores", buf);
    snprintf(buf, sizeof buf, "%.1f", steal);
    kh_record_set_env(r, "noise_steal_pct", buf);
}
