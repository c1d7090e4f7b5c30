/* <khost/kit.h>: split into one header per concern under <khost/kit/> in SDK 1.3; this path includes every one of
 * them that its declarations went to (docs/ABI.md, "Source compatibility"). */
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/kit.h> is deprecated: include the <khost/kit/*.h> headers you use (status, clock, alloc, blas, rng, spec, flops, optimizer, init)"
#endif
#include "khost/abi.h"
#include "khost/model.h"
#include "khost/kit/alloc.h"
#include "khost/kit/blas.h"
#include "khost/kit/clock.h"
#include "khost/kit/flops.h"
#include "khost/kit/init.h"
#include "khost/kit/optimizer.h"
#include "khost/kit/rng.h"
#include "khost/kit/spec.h"
#include "khost/kit/status.h"
