/* khost/kit/spin.h — the pause a polling loop runs between polls (x86's PAUSE: it yields the core's pipeline to
 * its sibling and keeps the loop from flooding the memory system; elsewhere nothing). */
#ifndef KHOST_KIT_SPIN_H
#define KHOST_KIT_SPIN_H

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void kh_cpu_relax(void) { _mm_pause(); }
#else
static inline void kh_cpu_relax(void) {}
#endif

#endif
