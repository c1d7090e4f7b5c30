/* <khost/graph.h>: moved to <khost/kit/graph.h> in SDK 1.3, and its optimizer schedule became the kit's
 * (khost/kit/optimizer.h); the path and the old names are kept (docs/ABI.md, "Source compatibility"). */
#ifndef KHOST_COMPAT_GRAPH_H
#define KHOST_COMPAT_GRAPH_H
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/graph.h> is deprecated: include <khost/kit/graph.h>"
#endif
#include "khost/kit/deprecated.h"
#include "khost/kit/graph.h"
#include "khost/kit/optimizer.h"

KH_DEPRECATED("kh_optimizer_resolve") static inline kh_optimizer_spec
kh_graph_resolve_optimizer(const kh_optimizer_spec *o) {
    return kh_optimizer_resolve(o);
}
KH_DEPRECATED("kh_optimizer_step_lr") static inline double kh_graph_step_lr(const kh_optimizer_spec *o,
                                                                            int64_t iterations) {
    return kh_optimizer_step_lr(o, iterations);
}
KH_DEPRECATED("kh_optimizer_slots") static inline int kh_graph_optimizer_slots(uint32_t kind) {
    return kh_optimizer_slots(kind);
}
#endif
