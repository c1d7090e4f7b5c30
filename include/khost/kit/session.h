/* khost/kit/session.h — the backend-session layer: what every backend module would otherwise write again
 * around its executors (kit/session/session.c).
 *
 * The layer owns the module descriptor and the session half of the api table: get_caps (the struct_size
 * handshake, unknown device kinds), open (argument checks, the device copied and named, threads, the session
 * allocated at the backend's size, the backend's open and, on its failure, nothing left behind), close,
 * last_error, environment; the error text every call fails with ("<backend> <what> on <device>: <why>"); the
 * host's allocator; and the model life cycle's frame: compile (argument checks, the model allocated at the
 * backend's size, the backend's build step, everything freed through the backend's model_free when a step
 * fails) and the checks that open every model call.
 *
 * A backend supplies a kh_session_backend: its names, its per-device-kind hooks (caps, open, close,
 * environment) and its model-level api members. Its session embeds kh_session as its FIRST member (the layer
 * allocates backend.session_size zeroed bytes), and its model starts with a kh_session pointer (the layer
 * allocates the model at the size compile is given). The graph runtime (khost/kit/graph_runtime.h) is one
 * such backend description, built once for every graph backend; cntk writes its own over its executors. */
#ifndef KHOST_KIT_SESSION_H
#define KHOST_KIT_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "khost/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kh_session kh_session;

typedef struct kh_session_backend {
    const char *name;        /* module name and the first word of every error */
    const char *version;
    const char *description;
    size_t session_size;     /* sizeof the backend's session; a kh_session is its first member */
    /* The capabilities of a device kind (KH_DEVICE_CPU or KH_DEVICE_CUDA): the layer set and flags, and
     * whether the kind is available here and why (the note). c comes zeroed with its struct_size set. */
    void (*caps)(uint32_t device_kind, kh_caps *c);
    /* After the layer filled the session (host, dev with its id, threads >= 1): the backend's settings, its
     * executor, its device state. On failure the error goes to err and the layer frees the session. */
    kh_status (*open)(kh_session *s, char *err, size_t errlen);
    void (*close)(kh_session *s); /* undoes open; the layer frees the session */
    kh_status (*environment)(kh_session *s, char *buf, size_t n);
    /* The model-level members (compile .. memory_info, profile, compile_info), copied into the api table as
     * they are; the session members of this table are ignored. */
    kh_backend_api model;
} kh_session_backend;

struct kh_session {
    const kh_host_api *host;
    const kh_session_backend *backend;
    const void *exec;      /* the backend's executor of dev.kind (its own type), set by its open */
    kh_device dev;         /* id filled in ("cpu", "cuda:<ordinal>") */
    int threads;           /* the device's threads (>= 1) */
    char err[512];         /* last_error */
};

/* The module descriptor (a module's khost_module_entry returns it); the host given here is the one sessions
 * opened without a host use. One backend per module. */
const kh_module_desc *kh_session_module(const kh_session_backend *b, const kh_host_api *host);
const kh_host_api *kh_session_module_host(void);

/* The session's error "<backend> <what> on <device>: <why>"; returns st. */
kh_status kh_session_fail(kh_session *s, kh_status st, const char *what, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The same for a layer: "<backend> <kind>[<index>] <op> on <device>: <why>". */
kh_status kh_session_layer_fail(kh_session *s, kh_status st, uint32_t kind, int32_t index, const char *op,
                                const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
void *kh_session_alloc(kh_session *s, size_t bytes); /* the host's allocator: aligned, zeroed */
void kh_session_free(kh_session *s, void *p);

/* The compile frame: checks (out, session, spec, a positive max_batch), model_size zeroed bytes whose first
 * member is the kh_session pointer (set here), build(model, spec, opts), and on any failure model_free(model)
 * (which must accept a model build left half done). */
kh_status kh_session_compile(kh_bsession *bs, const kh_model_spec *spec, const kh_compile_opts *opts,
                             size_t model_size, kh_status (*build)(kh_bmodel *m, const kh_model_spec *spec,
                                                                   const kh_compile_opts *opts),
                             void (*model_free)(kh_bmodel *m), kh_bmodel **out);
/* The check that opens a model call: the model's session, or NULL when the model is NULL (the caller returns
 * KH_ERR_INVALID; there is no session to write to). */
static inline kh_session *kh_session_of(kh_bmodel *m) { return m ? *(kh_session **)(void *)m : NULL; }
/* The tensors a call needs are present (the caller's test, e.g. x && y): KH_OK; else the session's error
 * "<backend> <op> on <device>: missing <names>". */
kh_status kh_session_need(kh_session *s, const char *op, const char *names, int present);

#ifdef __cplusplus
}
#endif
#endif
