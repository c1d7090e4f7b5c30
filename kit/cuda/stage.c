/* kit/cuda/stage.c — double-buffered input staging (khost/kit/cuda.h), through the driver table. */
#include <stdio.h>
#include <string.h>

#include "khost/kit/cuda.h"
#include "khost/kit/cuda_driver.h"

/* The driver's failure as the status and "call: NAME: description" in why. */
static kh_status failed(CUresult r, const char *call, char *why, size_t n) {
    char t[160];
    snprintf(why, n, "%s: %s", call, kh_cu_result_text(r, t, sizeof t));
    return kh_cu_status(r);
}

#define TRY(call)                                                       \
    do {                                                                \
        CUresult r_ = (call);                                           \
        if (r_ != CUDA_SUCCESS) return failed(r_, #call, why, n);       \
    } while (0)

kh_status kh_cuda_stage_init(kh_cuda_stage *s, CUstream compute, CUstream copy, size_t bytes, char *why, size_t n) {
    memset(s, 0, sizeof *s);
    s->compute = compute;
    s->copy = copy ? copy : compute;
    s->bytes = bytes;
    for (int k = 0; k < 2; k++) {
        TRY(kh_cu.MemAllocHost(&s->pin[k], bytes > 0 ? bytes : 1));
        TRY(kh_cu.EventCreate(&s->uploaded[k], CU_EVENT_DISABLE_TIMING));
        TRY(kh_cu.EventCreate(&s->consumed[k], CU_EVENT_DISABLE_TIMING));
    }
    return KH_OK;
}

void kh_cuda_stage_free(kh_cuda_stage *s) {
    if (s->copy) kh_cu.StreamSynchronize(s->copy);
    for (int k = 0; k < 2; k++) {
        if (s->pin[k]) kh_cu.MemFreeHost(s->pin[k]);
        if (s->uploaded[k]) kh_cu.EventDestroy(s->uploaded[k]);
        if (s->consumed[k]) kh_cu.EventDestroy(s->consumed[k]);
    }
    memset(s, 0, sizeof *s);
}

/* An event never recorded is complete: the first use of each buffer does not wait. */
kh_status kh_cuda_stage_next(kh_cuda_stage *s, int *k, void **pin, char *why, size_t n) {
    *k = s->next;
    TRY(kh_cu.EventSynchronize(s->uploaded[*k]));
    /* the slot's uploads, queued next on the copy stream, wait until the compute stream has released it */
    if (s->copy != s->compute) TRY(kh_cu.StreamWaitEvent(s->copy, s->consumed[*k], 0));
    s->next ^= 1;
    *pin = s->pin[*k];
    return KH_OK;
}

kh_status kh_cuda_stage_upload(kh_cuda_stage *s, int k, CUdeviceptr dst, size_t off, size_t bytes, char *why, size_t n) {
    TRY(kh_cu.MemcpyHtoDAsync(dst, (const char *)s->pin[k] + off, bytes, s->copy));
    return KH_OK;
}

kh_status kh_cuda_stage_ready(kh_cuda_stage *s, int k, char *why, size_t n) {
    TRY(kh_cu.EventRecord(s->uploaded[k], s->copy));
    if (s->copy != s->compute) TRY(kh_cu.StreamWaitEvent(s->compute, s->uploaded[k], 0));
    s->cur = k;
    return KH_OK;
}

kh_status kh_cuda_stage_release(kh_cuda_stage *s, char *why, size_t n) {
    TRY(kh_cu.EventRecord(s->consumed[s->cur], s->compute));
    return KH_OK;
}
