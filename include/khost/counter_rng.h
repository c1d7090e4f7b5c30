/* <khost/counter_rng.h>: moved to <khost/kit/counter_rng.h> in SDK 1.3; kept (docs/ABI.md, "Source compatibility"). */
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/counter_rng.h> is deprecated: include <khost/kit/counter_rng.h>"
#endif
#include "khost/kit/counter_rng.h"
