/* core/cell/guarded.h — buffers the host hands to a module (a batch the task fills, the backend's view of it)
 * end at an inaccessible page, so a module that writes or reads past one faults at that instruction, in that
 * call, instead of corrupting the host's heap (the crash is then named: callmark.h). */
#ifndef KHOST_CORE_GUARDED_H
#define KHOST_CORE_GUARDED_H

#include <stddef.h>

/* n bytes (64-byte aligned, so up to 63 bytes past the end go unnoticed) followed by a PROT_NONE page; NULL
 * when out of memory. */
void *kh_guarded_alloc(size_t n);
void kh_guarded_free(void *p);
#endif
