/* khost/backend.h — the backend ABI: capabilities, per-device sessions, compiled models.
 *
 * Lifetime: open() a session per device, compile() models in it, free models before close().
 * Threading: the host calls one session from one thread at a time; before every call on a CUDA session it
 * makes the device's primary context current (the backend creates no context of its own).
 * Errors: every call returns kh_status; last_error(session) then explains it in the form
 * "<backend> <layer/op> on <device>: <why>" and stays valid until the next call on that session.
 * Metrics accumulate inside the backend (sums, not means) and are read only when the host asks, so a GPU
 * backend need not synchronise every batch.
 */
#ifndef KHOST_BACKEND_H
#define KHOST_BACKEND_H

#include <stdint.h>

#include "khost/abi.h"
#include "khost/model.h"
#include "khost/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kh_device_kind { KH_DEVICE_CPU = 0, KH_DEVICE_CUDA = 1, KH_DEVICE_KIND_END } kh_device_kind;

typedef struct kh_device {
    uint32_t struct_size;
    uint32_t kind;       /* kh_device_kind */
    int32_t ordinal;     /* CUDA ordinal; -1 for the cpu */
    char id[16];         /* "cpu", "cuda:0" */
    char name[128];      /* "NVIDIA H200", or the CPU model */
    char pci_bus_id[32]; /* "0000:3b:00.0"; empty for the cpu */
    int32_t cc_major, cc_minor;
    int64_t total_mem;   /* bytes */
    int32_t multiprocessors;
    int32_t driver_version; /* cuDriverGetVersion, e.g. 13000; 0 for the cpu */
    int32_t threads;     /* cpu: threads the backend may use */
    void *cu_context;    /* CUcontext (primary), current on the calling thread during backend calls */
    /* ABI 1.4: the FP32 math the session must use (kh_math_mode); a host of 1.3 or older passes a shorter
     * struct and means KH_MATH_FP32. A backend applies it to every library call that has a math setting
     * (cuBLAS math mode, cuDNN convolution and RNN math type) and refuses a value it does not know. */
    uint32_t math;
} kh_device;

/* FP32 math of a session (kh_device.math). FP32: strict IEEE single precision with FMA, no tensor-core
 * rounding of the inputs (the default: every backend, every device). TF32: the libraries may round FP32
 * inputs to TF32 (10-bit mantissa) on tensor cores (compute capability 8.0 and newer); on the cpu it does not
 * exist and the host records fp32. */
typedef enum kh_math_mode { KH_MATH_FP32 = 0, KH_MATH_TF32 = 1 } kh_math_mode;

/* Capability flags beyond layer kinds. */
#define KH_CAP_CONV_SAME     (1u << 0) /* Conv2D padding='same' */
#define KH_CAP_ONEHOT_INPUT  (1u << 1) /* takes index input for input_onehot models (no expansion) */
#define KH_CAP_LSTM_SEQUENCES (1u << 2) /* return_sequences=1 */
#define KH_CAP_PREDICT       (1u << 3)
#define KH_CAP_PROBES        (1u << 4) /* forward/backward/get_grad implemented (khost verify) */

typedef struct kh_caps {
    uint32_t struct_size;    /* set by the host */
    int32_t available;       /* 0: this device kind cannot be used (CPU-only build, no library); see note */
    uint32_t layer_kinds;    /* bit (1u << kh_layer_kind) per supported kind */
    uint32_t activations;    /* bit (1u << kh_activation) */
    uint32_t losses;         /* bit (1u << kh_loss) */
    uint32_t optimizers;     /* bit (1u << kh_optimizer) */
    uint32_t flags;          /* KH_CAP_* */
    uint32_t image_layout;   /* KH_LAYOUT_NHWC or KH_LAYOUT_NCHW: how image batches must arrive */
    char note[128];          /* e.g. "built without CUDA" */
} kh_caps;

typedef struct kh_bsession kh_bsession; /* backend state for one device */
typedef struct kh_bmodel kh_bmodel;     /* a compiled model, owned by its session */

typedef struct kh_compile_opts {
    uint32_t struct_size;
    int32_t max_batch;      /* no batch passed later is larger */
    uint64_t seed;          /* dropout masks and any backend-side randomness */
    int32_t deterministic;  /* 1: dropout is the identity (verify and parity tests) */
} kh_compile_opts;

typedef enum kh_phase { KH_PHASE_TRAIN = 0, KH_PHASE_EVAL = 1 } kh_phase;

/* FROZEN: three sums every backend accumulates; a new metric is a new optional call, not a member. */
typedef struct kh_metrics {
    double loss_sum; /* sum over samples of the per-sample loss */
    double correct;  /* samples whose prediction matched (argmax, or p > 0.5 for binary) */
    int64_t samples;
} kh_metrics;

/* Per-layer profile (ABI 1.1, kh_backend_api.profile). Times are seconds summed over the timed steps.
 * FROZEN: rows are a host-allocated array the backend writes at its own sizeof; a new figure goes into
 * kh_profile (sized) or a new row kind, never into the row. */
typedef struct kh_profile_row {
    int32_t layer;      /* the model layer, or -1 for a row of one op kind (graph backends) */
    char what[32];      /* the layer's kind ("conv2d") or the op kind ("MatMul") */
    double forward_s;   /* forward work (graph backends: forward and loss ops) */
    double backward_s;  /* gradient work */
    double optimizer_s; /* parameter updates, where the backend can attribute them */
    int64_t calls;      /* kernels or library calls of the row per step */
} kh_profile_row;

/* A row's backward time split into its two gradients (ABI 1.5). The input gradient is the backward work on the
 * path to the layer's input: the data gradient (Conv2DBackpropInput, dy W^T, the recurrence's backpropagation
 * through time) and the activation's gradient on the way; the weight gradient is the work only the parameter
 * updates need: filter, bias and weight-matrix gradients, Embedding's scattered rows. The two add up to at most
 * backward_s. -1 in a member: not split (the row, or the backend, does not tell them apart). The elements are an
 * array beside the rows, grad_size bytes apart: a later minor may append a member, and a backend writes one only
 * when grad_size covers it (KH_HAS_MEMBER); khost/kit/profile.h finds element i. */
typedef struct kh_profile_grad {
    double input_s;  /* out: seconds of the input gradient, or -1 */
    double weight_s; /* out: seconds of the weight gradient, or -1 */
} kh_profile_grad;

typedef struct kh_profile {
    uint32_t struct_size;  /* set by the host */
    int32_t cap_rows;      /* host: entries in rows */
    kh_profile_row *rows;  /* host-allocated */
    int32_t n_rows;        /* out: rows written, the layer rows first in layer order, then op kinds */
    int32_t steps;         /* out: steps timed */
    double total_s;        /* out: wall time of the timed steps, synchronised */
    double other_s;        /* out: time in no row (loss, optimizer when not per layer, staging) */
    /* --- ABI 1.5 (a backend reads them only when struct_size covers them) --- */
    void *grads;           /* host-allocated: cap_rows elements, element i for rows[i], every member -1; or NULL */
    uint32_t grad_size;    /* host: the element size, sizeof(kh_profile_grad) as the host was compiled */
} kh_profile;

/* The device memory a model holds (ABI 1.4, kh_backend_api.memory_info), as the backend counts its own
 * allocations for it (weights, optimizer slots, arena, staging, workspaces); what a library allocates inside
 * its own calls (cuBLAS's workspace, cuDNN's handle state) is not the backend's to count, and `what` says so. */
typedef struct kh_memory_info {
    uint32_t struct_size;      /* set by the host; the backend writes only members it covers (KH_HAS_MEMBER) */
    int64_t device_bytes;      /* out: held now on the model's device; -1 not counted (e.g. a cpu session) */
    int64_t device_peak_bytes; /* out: the most held at once since compile; -1 not counted */
    char what[160];            /* out: what the count covers, e.g. "cudaMalloc: weights, slots, arena, workspaces" */
} kh_memory_info;

/* How a model was compiled (ABI 1.2, kh_backend_api.compile_info): for backends that generate and compile
 * code at model-compile time through a cache (theano). Times are seconds of the compile() call that made the
 * model, measured by the backend; the host measures the call's wall time itself. */
typedef enum kh_compile_cache {
    KH_COMPILE_NO_CACHE = 0, /* nothing was generated (or nothing went through a cache) */
    KH_COMPILE_HIT = 1,      /* every generated unit was loaded from the cache */
    KH_COMPILE_MISS = 2      /* at least one unit was compiled now */
} kh_compile_cache;

typedef struct kh_compile_info {
    uint32_t struct_size;  /* set by the host; the backend writes only members it covers (KH_HAS_MEMBER) */
    int32_t cache;         /* kh_compile_cache */
    int32_t units;         /* generated sources (functions / modules) */
    double codegen_s;      /* graph optimisation and source generation */
    double compile_s;      /* the C compiler or NVRTC (0 on a hit) */
    double load_s;         /* cache checks and dlopen / cuModuleLoadData */
} kh_compile_info;

typedef struct kh_backend_api {
    uint32_t struct_size;

    /* What this backend supports on a device kind; fills *out (host set out->struct_size). No side effects. */
    kh_status (*get_caps)(uint32_t device_kind, kh_caps *out /* out */);

    /* One session per device. On failure *out is NULL and err holds the reason. */
    kh_status (*open)(const kh_host_api *host, const kh_device *dev, kh_bsession **out /* out */,
                      char *err /* out */, size_t errlen);
    void (*close)(kh_bsession *s);
    const char *(*last_error)(kh_bsession *s);
    /* Library versions for the results' environment, as "key=value" pairs separated by spaces,
     * e.g. "blas=openblas-0.3.21 threads=2" or "cudnn=9.10.0 cublas=13.0.0". Range: the text and its NUL within
     * buf[0..n); the host fails the cell on a write past n or text without its NUL. */
    kh_status (*environment)(kh_bsession *s, char *buf /* out */, size_t n);

    /* Compile a model spec. The spec (and its layers) need not outlive the call. Weights are unset
     * until the host calls set_weight for every (layer, slot). Range: KH_OK comes with *out non-NULL (the
     * host fails the cell otherwise); on failure *out is NULL. */
    kh_status (*compile)(kh_bsession *s, const kh_model_spec *spec, const kh_compile_opts *opts,
                         kh_bmodel **out /* out */);
    void (*model_free)(kh_bmodel *m);

    /* Weights in canonical layout (khost/model.h); w->dims must match exactly. */
    kh_status (*set_weight)(kh_bmodel *m, int32_t layer, int32_t slot, const kh_tensor *w);
    kh_status (*get_weight)(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *w /* out: data */);

    /* x: (n, input...) in the layout from get_caps (images) or NC/NT/NTC; y: (n) i32 labels.
     * train_batch runs forward, loss, backward and one optimizer step and adds to the TRAIN metrics;
     * eval_batch runs the inference forward pass and adds to the EVAL metrics. Both may return before the
     * device finishes: the host calls sync() before reading clocks. */
    kh_status (*train_batch)(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y);
    kh_status (*eval_batch)(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y);
    /* Inference output (n, outputs...) into out (host-allocated); synchronous. */
    kh_status (*predict)(kh_bmodel *m, const kh_tensor *x, kh_tensor *out /* out: data */);
    /* Copy the accumulated metrics of a phase; reset != 0 zeroes them afterwards. Synchronises as needed.
     * Range: samples >= 0 and 0 <= correct <= samples (the host fails the cell on sums that cannot be). */
    kh_status (*read_metrics)(kh_bmodel *m, uint32_t phase, kh_metrics *out /* out */, int32_t reset);
    /* Wait until all queued work of the model is done. */
    kh_status (*sync)(kh_bmodel *m);

    /* Probes for khost verify (KH_CAP_PROBES); NULL when not implemented.
     * forward: training-mode forward of the whole model into out, keeping what backward needs.
     * backward: back-propagate dy (the gradient of the model output) through the last forward; writes the
     * input gradient into dx when dx is non-NULL and the input is f32; parameter gradients are then readable
     * with get_grad (overwritten, not accumulated, by each backward). No optimizer step. */
    kh_status (*forward)(kh_bmodel *m, const kh_tensor *x, kh_tensor *out /* out: data */);
    kh_status (*backward)(kh_bmodel *m, const kh_tensor *dy, kh_tensor *dx /* out: data, may be NULL */);
    kh_status (*get_grad)(kh_bmodel *m, int32_t layer, int32_t slot, kh_tensor *g /* out: data */);

    /* --- ABI 1.1 (read only when struct_size covers it; NULL when not implemented) ---
     * profile: train `warmup` untimed batches, then `steps` timed ones, all on the batch x, y (as
     * train_batch: the weights change and the TRAIN metrics accumulate), timing each layer's forward and
     * backward work and, for graph backends, each op kind; fill out->rows (at most out->cap_rows) and
     * synchronise before returning. Timing must cost nothing measurable when profile is not running.
     * ABI 1.5: where out has grads, a backend that can tell a row's two gradients apart writes them there
     * (kh_profile_grad); one that cannot leaves them -1. */
    kh_status (*profile)(kh_bmodel *m, const kh_tensor *x, const kh_tensor *y, int32_t warmup, int32_t steps,
                         kh_profile *out /* out: rows, n_rows, steps, total_s, other_s */);

    /* --- ABI 1.2 (read only when struct_size covers it; NULL for backends without generated code) ---
     * compile_info: how the model m was compiled (kh_compile_info); out is host-owned with struct_size set and
     * every member zeroed. Cheap and side-effect free: it reports what compile() measured, it compiles nothing.
     * When m was a cache miss, the host compiles the same spec once more right after (expecting a hit) to
     * record the warm compile time beside the cold one, and frees that second model before training. */
    kh_status (*compile_info)(kh_bmodel *m, kh_compile_info *out /* out */);

    /* --- ABI 1.4 (read only when struct_size covers it; NULL when the backend does not count) ---
     * memory_info: the device memory model m holds now and held at its peak (kh_memory_info); out is
     * host-owned with struct_size set, device_bytes and device_peak_bytes -1, what empty. Cheap, no sync. */
    kh_status (*memory_info)(kh_bmodel *m, kh_memory_info *out /* out */);
} kh_backend_api;

#ifdef __cplusplus
}
#endif
#endif
