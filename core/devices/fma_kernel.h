/* core/devices/fma_kernel.h — the FMA-throughput kernel of the compute ceiling (fma_kernel.c). */
#ifndef KHOST_CORE_FMA_KERNEL_H
#define KHOST_CORE_FMA_KERNEL_H

/* iters iterations of the chains; returns their sum so the work is kept. */
float kh_fma_chains(long iters, float m, float a);
/* FLOPs one iteration makes (a multiply-add counted as 2). */
double kh_fma_flops_per_iter(void);
#endif
