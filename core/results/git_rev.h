/* git_rev.h — the source revision this khost was built from ("<12 hex>[-dirty]" or "unknown"). */
#ifndef KHOST_GIT_REV_H
#define KHOST_GIT_REV_H

const char *kh_git_rev(void);

#endif
