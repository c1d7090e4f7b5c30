/* kit/base/clock.c — the monotonic clock every duration in khost and its modules is measured with. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "khost/kit/clock.h"

double kh_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
