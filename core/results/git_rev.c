/* git_rev.c — the one translation unit that sees the build-time git revision (generated header), so a
 * new revision recompiles this file only. */
#include "results/git_rev.h"

#include "khost_git_rev.h"

const char *kh_git_rev(void) { return KHOST_GIT_REV; }
