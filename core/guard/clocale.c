/* core/guard/clocale.c — see clocale.h. */
#define _POSIX_C_SOURCE 200809L
#include "guard/clocale.h"

#include <locale.h>

int kh_clocale_pin(void) {
    locale_t c = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c == (locale_t)0) return -1;
    return uselocale(c) == (locale_t)0 ? -1 : 0; /* kept for the process's lifetime */
}
