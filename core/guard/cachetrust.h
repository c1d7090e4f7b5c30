/* core/guard/cachetrust.h — may the host keep what it learned (module inspections, the CPU peak) under a folder?
 *
 * The rule of ssh's StrictModes, applied to every folder on the way down: each existing component of the
 * path, from / to the folder itself, must belong to root or to the user running khost and must not be
 * group- or world-writable unless it has the sticky bit (/tmp). Otherwise another local user could rename
 * an entry and put a folder of their own in its place, and the host would trust what it reads there. When
 * the rule fails the host keeps nothing there: the module cache is not used (modules are inspected every
 * time) and the peak is measured and not saved, with one warning naming the folder.
 */
#ifndef KHOST_CORE_CACHETRUST_H
#define KHOST_CORE_CACHETRUST_H
#include <stddef.h>
/* 0 when dir and its ancestors pass (components not yet created are fine); -1 and err when not. */
int kh_cachetrust_check(const char *dir, char *err, size_t errlen);
/* The same for the folder that holds file. */
int kh_cachetrust_check_file(const char *file, char *err, size_t errlen);
#endif
