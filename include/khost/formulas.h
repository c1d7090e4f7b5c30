/* <khost/formulas.h>: moved to <khost/kit/formulas.h> in SDK 1.3; kept (docs/ABI.md, "Source compatibility"). */
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/formulas.h> is deprecated: include <khost/kit/formulas.h>"
#endif
#include "khost/kit/formulas.h"
