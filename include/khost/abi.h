/* khost/abi.h — versioning, status codes, the module descriptor and the host-services table.
 *
 * The numbered contract every module (backend or task) follows:
 *   1. Export exactly one symbol, KH_ENTRY_NAME, with the signature kh_entry_fn (use KH_EXPORT).
 *   2. Never exit(), abort() or write to stdout; report failures through status codes and error text.
 *   3. Never link against the khost binary: everything the host offers comes through kh_host_api.
 *   4. Zero CUDA devices is normal; a backend with no usable device still loads and says so.
 *   5. Keep no pointer to a host tensor after the call that received it returns.
 *   6. Report work it cannot do as KH_UNSUPPORTED with a reason, never by crashing.
 *   7. Every struct crossing the ABI either starts with struct_size (members are only ever appended, and a
 *      reader reads a member only when struct_size says it exists: KH_HAS_MEMBER), or travels as an array
 *      whose element size the host negotiates (kh_layer_spec: kh_module_desc.layer_spec_size; the host
 *      repacks the array for a module built with another size), or is declared FROZEN beside its
 *      definition with the reason: its layout never changes within a major version.
 *   8. Members and parameters a callee writes are marked "out"; everything else is read-only to it.
 * Version rule: the host refuses a module whose abi_major differs from its own or whose abi_minor is newer.
 * MINOR: a member appended to a sized struct, an optional call appended to an api table, a new enum value a
 * module may ignore. MAJOR: anything else (a member moved, resized or removed, a frozen struct changed, a
 * required call added). Each minor is listed below and in docs/ABI.md.
 */
#ifndef KHOST_ABI_H
#define KHOST_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KH_ABI_MAJOR 1
/* 1.1: kh_backend_api.profile (optional; 1.0 modules load unchanged, their tables end before it)
 * 1.2: kh_backend_api.compile_info (optional; 1.0 and 1.1 modules load unchanged, their tables end before it)
 * 1.3: kh_module_desc.layer_spec_size (the element size of the module's kh_layer_spec arrays; older
 *      descriptors end before it and mean KH_LAYER_SPEC_SIZE_1_0)
 * 1.4: kh_device.math (kh_math_mode: fp32 or tf32; a shorter kh_device from an older host means fp32, and an
 *      older module, which never reads it, keeps its own FP32 math); kh_backend_api.memory_info (optional:
 *      the device memory a model holds, as the backend counts its own allocations)
 * 1.5: kh_profile.grads and grad_size (each profile row's backward split into input and weight gradient, an
 *      array of kh_profile_grad beside the frozen rows; an older backend never writes it and its rows stay
 *      unsplit, an older host's shorter kh_profile has none) */
#define KH_ABI_MINOR 5

/* The one symbol a module exports. */
#define KH_ENTRY_NAME "khost_module_entry"

#if defined(__GNUC__)
#define KH_EXPORT __attribute__((visibility("default")))
#else
#define KH_EXPORT
#endif

/* True when a struct of size `size` (its struct_size field) contains `member` entirely. */
#define KH_HAS_MEMBER(type, size, member) \
    ((size_t)(size) >= offsetof(type, member) + sizeof(((type *)0)->member))

/* --- status codes: every ABI call returns one ------------------------------------------------------- */
typedef enum kh_status {
    KH_OK = 0,
    KH_ERR_INVALID = 1,     /* bad argument or malformed spec */
    KH_ERR_UNSUPPORTED = 2, /* valid request this module cannot do (layer kind, device kind, option) */
    KH_ERR_NOMEM = 3,       /* host or device allocation failed */
    KH_ERR_DEVICE = 4,      /* CUDA/cuDNN/cuBLAS or driver error */
    KH_ERR_IO = 5,          /* file missing or unreadable */
    KH_ERR_DATA = 6,        /* file readable but malformed */
    KH_ERR_INTERNAL = 7     /* bug: broken invariant */
} kh_status;

/* --- module descriptor: what KH_ENTRY_NAME returns ---------------------------------------------------- */
typedef enum kh_module_kind { KH_MODULE_BACKEND = 1, KH_MODULE_TASK = 2 } kh_module_kind;

typedef struct kh_module_desc {
    uint32_t struct_size;    /* sizeof(kh_module_desc) as the module was compiled */
    uint16_t abi_major;      /* KH_ABI_MAJOR the module was compiled against */
    uint16_t abi_minor;      /* KH_ABI_MINOR the module was compiled against */
    uint32_t kind;           /* kh_module_kind */
    const char *name;        /* registry name, [a-z0-9_]+, unique among loaded modules */
    const char *version;     /* the module's own version string */
    const char *description; /* one line */
    const void *api;         /* const kh_backend_api * or const kh_task_api *, per kind */
    /* --- ABI 1.3 --- */
    uint32_t layer_spec_size; /* sizeof(kh_layer_spec) as the module was compiled; 0 = KH_LAYER_SPEC_SIZE_1_0.
                                 The host gives a backend, and reads from a task, kh_layer_spec arrays of this
                                 element size (repacking when its own differs). */
} kh_module_desc;
/* The smallest descriptor the host accepts (ABI 1.0 layout). */
#define KH_MODULE_DESC_MIN_SIZE (offsetof(kh_module_desc, api) + sizeof(void *))

/* --- host services ------------------------------------------------------------------------------------ */
typedef enum kh_log_level { KH_LOG_ERROR = 0, KH_LOG_WARN = 1, KH_LOG_INFO = 2, KH_LOG_DEBUG = 3 } kh_log_level;

/* A const table the host passes to the entry point; valid for the whole life of the module. Thread-safe. */
typedef struct kh_host_api {
    uint32_t struct_size;
    uint16_t abi_major, abi_minor; /* the host's ABI version */
    const char *host_version;
    /* Logging to the host's log (stderr or a file); `module` is the caller's name. printf-style. */
    void (*log)(kh_log_level level, const char *module, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;
    /* 64-byte aligned host memory; NULL on failure (never aborts). free(NULL) is a no-op. */
    void *(*alloc)(size_t size);
    void (*free)(void *p);
    /* A value from the registry: section "plugin NAME" / "task NAME" / "khost", key; NULL when absent.
     * The string lives as long as the host. */
    const char *(*config_get)(const char *section, const char *key);
    /* Progress of long module work (data loading, code generation): done of total units, what. */
    void (*progress)(const char *what, int64_t done, int64_t total);
} kh_host_api;

/* The entry point. Called once, right after dlopen, with the host's table; returns a descriptor that stays
 * valid until dlclose, or NULL (the host then reports "entry returned NULL"). Must not do heavy work. */
typedef const kh_module_desc *(*kh_entry_fn)(const kh_host_api *host);
/* A descriptor's static initialiser members for this header's ABI version:
 *   static const kh_module_desc desc = {KH_MODULE_DESC_HEAD, .kind = ..., .name = ..., ...}; */
#define KH_MODULE_DESC_HEAD \
    .struct_size = sizeof(kh_module_desc), .abi_major = KH_ABI_MAJOR, .abi_minor = KH_ABI_MINOR, \
    .layer_spec_size = sizeof(struct kh_layer_spec)

/* Every module defines exactly this function (its name is KH_ENTRY_NAME). Declared here so a module's
 * definition is checked against the contract and is the one symbol it exports. */
KH_EXPORT const kh_module_desc *khost_module_entry(const kh_host_api *host);

#ifdef __cplusplus
}
#endif
#endif
