/* khost/kit/pathtrust.h — may khost keep what it learned (module inspections, the CPU peak, generated code)
 * under a folder?
 *
 * The rule of ssh's StrictModes, applied to every folder on the way down: each existing component of the
 * path, from / to the folder itself, must belong to root or to the user running khost and must not be
 * group- or world-writable unless it has the sticky bit (/tmp). Otherwise another local user could rename
 * an entry and put a folder of their own in its place, and the host would trust what it reads there. When
 * the rule fails the host keeps nothing there: the module cache is not used (modules are inspected every
 * time), the peak is measured and not saved, and theano compiles into a private temporary cache, each
 * with one warning naming the folder. (kit/base/pathtrust.c)
 */
#ifndef KHOST_KIT_PATHTRUST_H
#define KHOST_KIT_PATHTRUST_H
#include <stddef.h>
/* 0 when dir and its ancestors pass (components not yet created are fine); -1 and err when not. */
int kh_path_trusted(const char *dir, char *err, size_t errlen);
/* The same for the folder that holds file. */
int kh_path_trusted_file(const char *file, char *err, size_t errlen);
#endif
