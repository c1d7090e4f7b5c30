/* core/cell/runguard.h — how `khost run` ends when it is stopped from outside or by a module.
 *
 * SIGINT, SIGTERM and SIGHUP set a flag that the training loop reads between batches: the cell then stops,
 * its record says "interrupted" with the epochs done, and run exits 128 + the signal's number. A second
 * signal of any of these kinds while the first is pending takes the default action at once (a module stuck
 * in one call cannot hold khost). A module that calls exit() in the middle of a cell ends in an atexit
 * handler here: the cell's record is written with status "error" naming the stage, a message goes to
 * stderr, and the process exits KH_EXIT_TRAIN instead of the module's code.
 */
#ifndef KHOST_CORE_RUNGUARD_H
#define KHOST_CORE_RUNGUARD_H

#include "results/results.h"

/* Catch the three signals (those already ignored stay ignored). */
void kh_runguard_signals(void);
/* The signal that asked the run to stop, 0 when none. */
int kh_runguard_stop_signal(void);
/* While rec is being made (begin .. end), an exit() from a module writes rec under out_dir as an error. */
void kh_runguard_begin(kh_cell_record *rec, const char *out_dir);
void kh_runguard_end(void);
#endif
