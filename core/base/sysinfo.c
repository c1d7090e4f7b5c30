/* core/base/sysinfo.c — what the machine and its clock say, for records and caches: the CPU's model name, the
 * time in UTC (base/sysinfo.h). */
#define _XOPEN_SOURCE 700 /* gmtime_r */
#include "base/sysinfo.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void kh_env_cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (!colon) break;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(buf, n, "%s", colon);
        size_t len = strlen(buf);
        while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) buf[--len] = 0;
        break;
    }
    fclose(f);
}

void kh_env_now_iso(char *buf, size_t n) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
