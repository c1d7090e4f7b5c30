/* khost/kit/clock.h — the monotonic clock every duration is measured with (kit/base/clock.c). */
#ifndef KHOST_KIT_CLOCK_H
#define KHOST_KIT_CLOCK_H

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on the monotonic clock (for durations). */
double kh_now(void);

#ifdef __cplusplus
}
#endif
#endif
