/* <khost/formulas_impl.h>: moved to <khost/kit/formulas_impl.h> in SDK 1.3; kept (docs/ABI.md, "Source compatibility"). */
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/formulas_impl.h> is deprecated: include <khost/kit/formulas_impl.h>"
#endif
#include "khost/kit/formulas_impl.h"
