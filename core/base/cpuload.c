/* core/base/cpuload.c — the machine's load beside this process (cpuload.h). */
#include "base/cpuload.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "khost/kit/clock.h"

void kh_cpuload_sample(kh_cpuload *n) {
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

int kh_cpuload_between(const kh_cpuload *a, const kh_cpuload *b, double *other_cores, double *steal_pct) {
    if (!a->ok || !b->ok || b->wall <= a->wall || b->total <= a->total) return -1;
    double hz = (double)sysconf(_SC_CLK_TCK);
    double busy = (double)(b->busy - a->busy), self = (double)(b->self - a->self);
    double others = busy > self ? busy - self : 0; /* ticks of CPU time nobody of ours spent */
    *other_cores = others / hz / (b->wall - a->wall);
    *steal_pct = 100.0 * (double)(b->steal - a->steal) / (double)(b->total - a->total);
    return 0;
}
