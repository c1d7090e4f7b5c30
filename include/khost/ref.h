/* <khost/ref.h>: moved to <khost/kit/ref.h> in SDK 1.3; kept (docs/ABI.md, "Source compatibility"). */
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/ref.h> is deprecated: include <khost/kit/ref.h>"
#endif
#include "khost/kit/ref.h"
