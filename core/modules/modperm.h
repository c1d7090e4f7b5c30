/* core/modules/modperm.h — may a module file be loaded at all? The rule of ssh's StrictModes: a module file, and
 * the folder that holds it, must not be writable by group or others, and must belong to root or to the
 * user running khost; otherwise someone else could put code into this process. The registry's
 * `strict_modes = false` in [khost] turns the check off (shared build trees with a group-writable umask). */
#ifndef KHOST_CORE_MODPERM_H
#define KHOST_CORE_MODPERM_H

#include <stddef.h>

/* 0 when path (absolute, symlinks resolved) and its folder pass; else -1 and err names the file or folder,
 * what is wrong ("group-writable (mode 0664)", "owned by uid 1001 (alice)") and the switch. */
int kh_modperm_check(const char *path, char *err, size_t errlen);
#endif
