/* khost/kit/half.h — loading a backend's GPU half on first use (kit/base/half.c).
 *
 * Why a second object: a backend's CUDA code links cuBLAS and cuDNN, whose pages (~150-230 MiB) the dynamic
 * loader maps as soon as the object that needs them is loaded — in every cpu cell too, where they would only
 * inflate the peak RSS a benchmark records. A backend therefore builds its CUDA code as a separate shared
 * object, its GPU half, in a folder beside the module (<folder of X.so>/<dir>/<file>: the folder keeps it out
 * of the host's plugin discovery, it is not a khost module), and loads it here the first time the CUDA device
 * kind is asked for (get_caps or open). The half exports one symbol returning a table that starts with a
 * kh_half_header; both objects are built from the same tree, so the header carries a layout version and the
 * sizes of the structures they share, and a half from another build is refused.
 *
 * Loaded once per process (thread-safe), RTLD_NOW | RTLD_LOCAL, never unloaded (halves are linked -z nodelete:
 * the static CUDA runtime registers atexit handlers inside them). When no half can be loaded, kh_half_why says
 * why (the caps note and open's error quote it); a build without CUDA passes built = 0 and the reason is
 * "built without CUDA (...)". */
#ifndef KHOST_KIT_HALF_H
#define KHOST_KIT_HALF_H

#include <pthread.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KH_HALF_MAX_SIZES 4
/* How kh_half_why begins when a built half could not be loaded (the file, dlerror()'s reason or the mismatch
 * follow). */
#define KH_HALF_NOT_LOADABLE "GPU half not loadable: "

/* The first member of every half's table. */
typedef struct kh_half_header {
    uint32_t version;                  /* the table's layout version, as the half was built */
    uint32_t n_sizes;                  /* used entries of sizes */
    uint32_t sizes[KH_HALF_MAX_SIZES]; /* sizeof each shared structure, as the half sees them */
} kh_half_header;

typedef const kh_half_header *(*kh_half_entry_fn)(void);

/* One per backend, a static object: the description is constant, the state is the loader's. */
typedef struct kh_half {
    const char *module;  /* "tensorflow": for messages */
    const char *dir;     /* "tensorflow-cuda": the folder beside the module */
    const char *file;    /* "tensorflow_cuda.so" */
    const char *entry;   /* the exported symbol, a kh_half_entry_fn */
    int built;           /* 0: this build has no GPU half (no CUDA toolkit, cuBLAS or cuDNN at configure time) */
    kh_half_header want; /* version and sizes the module expects */
    /* loader state */
    pthread_mutex_t lock;
    int done;                    /* the one load was tried (read and set atomically) */
    const kh_half_header *table; /* NULL until loaded; the half's table afterwards */
    char why[768];               /* why table is NULL */
} kh_half;

#define KH_HALF_INIT(module_, dir_, file_, entry_, built_, version_, ...)                                     \
    {.module = (module_), .dir = (dir_), .file = (file_), .entry = (entry_), .built = (built_),                \
     .want = {.version = (version_), .n_sizes = (uint32_t)(sizeof((uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)), \
              .sizes = {__VA_ARGS__}},                                                                        \
     .lock = PTHREAD_MUTEX_INITIALIZER}

/* Load on first call (later calls return at once): the half's table, or NULL (kh_half_why says why). */
const void *kh_half_load(kh_half *h);
/* The table if an earlier kh_half_load succeeded, else NULL; never loads (for calls that can only follow
 * an open through the half). */
const void *kh_half_loaded(const kh_half *h);
/* Why the half is not loaded ("" before the first kh_half_load). */
const char *kh_half_why(const kh_half *h);

#ifdef __cplusplus
}
#endif
#endif
