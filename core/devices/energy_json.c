/* core/devices/energy_json.c — a record's `energy` member from a counter and its per-epoch figures (energy.h). */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "devices/energy.h"

static cJSON *numbers(const double *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *x = isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull();
        if (!x || !cJSON_AddItemToArray(a, x)) {
            cJSON_Delete(x);
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

cJSON *kh_energy_json(const kh_energy *h, const double *epoch_j, const double *epoch_w, int n) {
    char source[KH_ENERGY_SOURCE_LEN], reason[KH_ENERGY_REASON_LEN];
    kh_energy_describe(h, source, reason);
    int ok = strcmp(source, "unavailable") != 0;
    cJSON *o = cJSON_CreateObject();
    cJSON *j = numbers(epoch_j, n), *w = numbers(epoch_w, n);
    if (!o || !j || !w || !cJSON_AddStringToObject(o, "source", source) ||
        !cJSON_AddStringToObject(o, "reason", ok ? "" : reason) ||
        !cJSON_AddStringToObject(o, "domain", ok ? reason : "") || !cJSON_AddItemToObject(o, "epoch_j", j)) {
        cJSON_Delete(o);
        cJSON_Delete(j);
        cJSON_Delete(w);
        return NULL;
    }
    if (!cJSON_AddItemToObject(o, "epoch_w", w)) {
        cJSON_Delete(o);
        cJSON_Delete(w);
        return NULL;
    }
    return o;
}
