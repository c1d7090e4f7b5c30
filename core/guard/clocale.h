/* core/guard/clocale.h — the host formats and parses numbers in the C locale, whatever a module does.
 *
 * The main thread gets its own C locale (uselocale): a module that calls setlocale(LC_ALL, "") changes only
 * the global locale, which this thread no longer follows, so records, reports, the registry and the code a
 * backend generates on this thread keep '.' as the decimal point. Threads a module starts itself follow the
 * global locale; what they format is the module's business.
 */
#ifndef KHOST_CORE_CLOCALE_H
#define KHOST_CORE_CLOCALE_H
/* 0, or -1 when the C locale object cannot be made (the process then keeps the global locale, "C" at start). */
int kh_clocale_pin(void);
#endif
