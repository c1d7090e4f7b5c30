/* core/results/record_roofline.c — the record's "roofline" object (see record_roofline.h). */
#include "results/record_roofline.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static cJSON *num(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

void kh_record_roofline_add(cJSON *o, const kh_cell_record *r) {
    if (!r->roofline_level[0]) return;
    cJSON *rl = cJSON_AddObjectToObject(o, "roofline");
    if (!rl) return;
    cJSON_AddStringToObject(rl, "level", r->roofline_level);
    cJSON_AddItemToObject(rl, "gbps", num(r->roofline_gbps));
    cJSON_AddItemToObject(rl, "working_set_bytes", num(r->step_working_set_bytes));
    cJSON_AddItemToObject(rl, "sgemm_gflops", num(r->sgemm_gflops));
    cJSON_AddItemToObject(rl, "fma_gflops", num(r->fma_gflops));
    cJSON *lv = cJSON_AddArrayToObject(rl, "levels");
    for (int i = 0; lv && i < r->n_mem_levels; i++) {
        const kh_mem_level *m = &r->mem_levels[i];
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        cJSON_AddStringToObject(e, "level", m->name);
        cJSON_AddItemToObject(e, "bytes", num(m->bytes));
        cJSON_AddItemToObject(e, "buffer_bytes", num(m->buffer_bytes));
        cJSON_AddItemToObject(e, "gbps", num(m->gbps));
        cJSON_AddStringToObject(e, "kernel", m->kernel);
        cJSON_AddItemToArray(lv, e);
    }
}

/* a level's or kernel's name: 1 to 7 of A-Z, a-z, 0-9 */
static int word_ok(const cJSON *v, char *dst, size_t n) {
    if (!cJSON_IsString(v)) return 0;
    size_t len = strlen(v->valuestring);
    if (len == 0 || len >= n || len != strspn(v->valuestring, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"))
        return 0;
    memcpy(dst, v->valuestring, len + 1);
    return 1;
}

static double nonneg(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 ? v->valuedouble : NAN;
}

int kh_record_roofline_read(const cJSON *o, kh_cell_record *r, char *err, size_t errlen) {
    const cJSON *rl = cJSON_GetObjectItemCaseSensitive(o, "roofline");
    if (!rl) return 0;
    kh_cell_record got;
    memset(&got, 0, sizeof got);
    const char *bad = NULL;
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(rl, "levels");
    if (!cJSON_IsObject(rl)) bad = "is not an object";
    else if (!word_ok(cJSON_GetObjectItemCaseSensitive(rl, "level"), got.roofline_level, sizeof got.roofline_level))
        bad = "\"level\" is not a level's name";
    else if (!cJSON_IsArray(lv) || cJSON_GetArraySize(lv) > KH_MEM_LEVELS_MAX)
        bad = "\"levels\" is not an array of the memory levels (at most five)";
    const cJSON *e;
    if (!bad) cJSON_ArrayForEach(e, lv) {
        kh_mem_level *m = &got.mem_levels[got.n_mem_levels++];
        m->bytes = nonneg(e, "bytes"), m->buffer_bytes = nonneg(e, "buffer_bytes"), m->gbps = nonneg(e, "gbps");
        if (!word_ok(cJSON_GetObjectItemCaseSensitive(e, "level"), m->name, sizeof m->name) ||
            !word_ok(cJSON_GetObjectItemCaseSensitive(e, "kernel"), m->kernel, sizeof m->kernel) ||
            isnan(m->bytes) || isnan(m->buffer_bytes) || isnan(m->gbps)) {
            bad = "an entry of \"levels\" is not {level, bytes, buffer_bytes, gbps, kernel}";
            break;
        }
    }
    if (bad) {
        snprintf(err, errlen, "field \"roofline\": %s", bad);
        return -1;
    }
    memcpy(r->roofline_level, got.roofline_level, sizeof r->roofline_level);
    r->roofline_gbps = nonneg(rl, "gbps");
    r->step_working_set_bytes = nonneg(rl, "working_set_bytes");
    r->sgemm_gflops = nonneg(rl, "sgemm_gflops");
    r->fma_gflops = nonneg(rl, "fma_gflops");
    r->n_mem_levels = got.n_mem_levels;
    memcpy(r->mem_levels, got.mem_levels, sizeof r->mem_levels);
    return 0;
}
