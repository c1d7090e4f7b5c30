/* kit/cuda/buffer.c — the device buffers of every GPU half (khost/kit/cuda.h): allocated, zeroed and counted
 * through the driver table, an allocation failure explained with the device's free memory. */
#include <stdio.h>

#include "khost/kit/cuda.h"
#include "khost/kit/cuda_driver.h"

kh_status kh_cuda_buffer_alloc(kh_mem_count *count, CUstream stream, CUdeviceptr *p, size_t bytes, const char *what,
                               char *why, size_t n) {
    *p = 0;
    if (bytes == 0) bytes = 256;
    CUresult r = kh_cu.MemAlloc(p, bytes);
    if (r == CUDA_SUCCESS) r = kh_cu.MemsetD8Async(*p, 0, bytes, stream);
    if (r == CUDA_SUCCESS) {
        kh_mem_count_add(count, (int64_t)bytes);
        return KH_OK;
    }
    if (*p) kh_cu.MemFree(*p);
    *p = 0;
    size_t fr = 0, tot = 0;
    if (kh_cu.MemGetInfo) kh_cu.MemGetInfo(&fr, &tot);
    char t[160];
    double mb = 1.0 / (1024.0 * 1024.0);
    snprintf(why, n, "%s for %s (%.1f MiB; %.0f of %.0f MiB free)",
             r == CUDA_ERROR_OUT_OF_MEMORY ? "out of device memory" : kh_cu_result_text(r, t, sizeof t), what,
             (double)bytes * mb, (double)fr * mb, (double)tot * mb);
    return kh_cu_status(r);
}

void kh_cuda_buffer_free(CUdeviceptr p) {
    if (p) kh_cu.MemFree(p);
}
