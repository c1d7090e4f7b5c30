/* core/cell/noise.c — the machine's load while a cell measured (noise.h). */
#define _GNU_SOURCE /* glob */
#include "cell/noise.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "khost/kit/clock.h"

void kh_noise_sample(kh_noise *n) {
    memset(n, 0, sizeof *n);
    n->wall = kh_now();
    FILE *f = fopen("/proc/stat", "re");
    unsigned long long v[10] = {0};
    int got = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                         &v[5], &v[6], &v[7], &v[8], &v[9])
                : 0;
    if (f) fclose(f);
    if (got < 8) return;
    /* user nice system idle iowait irq softirq steal [guest guest_nice: already inside user and nice] */
    n->busy = v[0] + v[1] + v[2] + v[5] + v[6];
    n->steal = v[7];
    n->total = n->busy + v[3] + v[4] + v[7];
    char buf[4096];
    f = fopen("/proc/self/stat", "re");
    size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[len] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces: fields count from after it */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return;
    n->self = ut + st;
    n->ok = 1;
}

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
    if (!a->ok || !b->ok || b->wall <= a->wall || b->total <= a->total) return;
    double hz = (double)sysconf(_SC_CLK_TCK);
    double busy = (double)(b->busy - a->busy), self = (double)(b->self - a->self);
    double others = busy > self ? busy - self : 0; /* ticks of CPU time nobody of ours spent */
    char buf[32];
    snprintf(buf, sizeof buf, "%.3f", b->wall - a->wall);
    kh_record_set_env(r, "noise_window_s", buf);
    snprintf(buf, sizeof buf, "%.2f", others / hz / (b->wall - a->wall));
    kh_record_set_env(r, "noise_other_cores", buf);
    snprintf(buf, sizeof buf, "%.1f", 100.0 * (double)(b->steal - a->steal) / (double)(b->total - a->total));
    kh_record_set_env(r, "noise_steal_pct", buf);
}
