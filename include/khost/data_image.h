/* <khost/data_image.h>: moved to <khost/kit/data_image.h> in SDK 1.3; kept (docs/ABI.md, "Source compatibility"). */
#ifdef KHOST_WARN_DEPRECATED
#pragma GCC warning "<khost/data_image.h> is deprecated: include <khost/kit/data_image.h>"
#endif
#include "khost/kit/data_image.h"
