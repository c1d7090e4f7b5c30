/* core/cli/cmd_peak.c — `khost peak [--measure] [--json]`: the cpu's roofline ceilings as the cells are held to
 * them (devices/peak.h): the sgemm peak and each memory level's capacity, buffer and bandwidth with the
 * kernel that reached it. --measure ignores the cache, measures again and caches the new figures. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/exitcodes.h"
#include "cli/commands.h"
#include "devices/peak.h"

static void usage(FILE *f) {
    fputs("usage: khost peak [--measure] [--json]\n"
          "  the cpu's roofline: the compute ceiling (GFLOP/s, the higher of an sgemm and FMA chains) and each\n"
          "  memory level's bandwidth (GB/s, the best of copy, triad, update and read kernels on every CPU over\n"
          "  buffers that fit the level; DRAM's at least four times the last-level cache per array). Cached per\n"
          "  machine; --measure measures again.\n",
          f);
}

static int print_json(const kh_peak *p) {
    cJSON *o = cJSON_CreateObject(), *lv = o ? cJSON_AddArrayToObject(o, "levels") : NULL;
    if (!lv) {
        cJSON_Delete(o);
        fprintf(stderr, "khost: peak: out of memory\n");
        return KH_EXIT_IO;
    }
    cJSON_AddNumberToObject(o, "gflops", kh_peak_flop_ceiling(p));
    cJSON_AddNumberToObject(o, "sgemm_gflops", p->gflops);
    cJSON_AddNumberToObject(o, "fma_gflops", p->fma_gflops);
    cJSON_AddStringToObject(o, "source", p->source);
    for (int i = 0; i < p->n_levels; i++) {
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        cJSON_AddStringToObject(e, "level", p->levels[i].name);
        cJSON_AddNumberToObject(e, "bytes", p->levels[i].bytes);
        cJSON_AddNumberToObject(e, "buffer_bytes", p->levels[i].buffer_bytes);
        cJSON_AddNumberToObject(e, "gbps", p->levels[i].gbps);
        cJSON_AddStringToObject(e, "kernel", p->levels[i].kernel);
        cJSON *k = cJSON_AddObjectToObject(e, "kernels"); /* measured by this call only: a cache keeps the best */
        for (int j = 0; k && j < KH_MEMBW_KERNELS; j++)
            if (p->levels[i].kernel_gbps[j] > 0)
                cJSON_AddNumberToObject(k, kh_membw_kernel_name((kh_membw_kernel)j), p->levels[i].kernel_gbps[j]);
        cJSON_AddItemToArray(lv, e);
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    if (!s) return KH_EXIT_IO;
    printf("%s\n", s);
    cJSON_free(s);
    return KH_EXIT_OK;
}

int kh_cmd_peak(int argc, char **argv) {
    int json = 0, fresh = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--measure")) fresh = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return KH_EXIT_OK;
        } else {
            fprintf(stderr, "khost: peak: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return KH_EXIT_USAGE;
        }
    }
    kh_peak p;
    if (kh_peak_cpu(&p, fresh) != 0) {
        fprintf(stderr, "khost: peak: %s\n", p.source);
        return KH_EXIT_DEVICE;
    }
    if (json) return print_json(&p);
    printf("cpu compute ceiling: %.1f GFLOP/s (sgemm %.1f, FMA chains %.1f)\n%s\n\n| level | capacity | measured over | GB/s | kernel | copy | triad "
           "| update | read |\n|---|---:|---:|---:|---|---:|---:|---:|---:|\n", kh_peak_flop_ceiling(&p), p.gflops,
           p.fma_gflops, p.source);
    for (int i = 0; i < p.n_levels; i++) {
        const kh_mem_level *l = &p.levels[i];
        char cap[32];
        if (l->bytes > 0) snprintf(cap, sizeof cap, "%.0f KiB", l->bytes / 1024);
        else snprintf(cap, sizeof cap, "-");
        printf("| %s | %s | %.0f KiB | %.1f | %s |", l->name, cap, l->buffer_bytes / 1024, l->gbps, l->kernel);
        for (int j = 0; j < KH_MEMBW_KERNELS; j++)
            if (l->kernel_gbps[j] > 0) printf(" %.1f |", l->kernel_gbps[j]);
            else printf(" — |");
        printf("\n");
    }
    printf("\nper kernel: this call's measurement (— when the figures came from the cache)\n");
    return KH_EXIT_OK;
}
