/* <khost/fastmath.h>: moved to <khost/kit/fastmath.h> in SDK 1.3; kept (docs/ABI.md, "Source compatibility"). */
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/fastmath.h> is deprecated: include <khost/kit/fastmath.h>"
#endif
#include "khost/kit/fastmath.h"
