/* <khost/data_text.h>: moved to <khost/kit/data_text.h> in SDK 1.3; kept (docs/ABI.md, "Source compatibility"). */
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/data_text.h> is deprecated: include <khost/kit/data_text.h>"
#endif
#include "khost/kit/data_text.h"
