/* core/cell/callmark.h — which module call a cell is in, so a crash inside a module is named: a fatal signal
 * (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) prints "khost: crashed in backend 'cntk' train_batch" on stderr
 * (the cell's log) before the process dies of it, and the matrix puts that into the record's reason. */
#ifndef KHOST_CORE_CALLMARK_H
#define KHOST_CORE_CALLMARK_H

#define KH_CALLMARK_PREFIX "khost: crashed in "

/* Install the handlers (on an alternate stack: a stack overflow is named too) and the two module names. */
void kh_callmark_install(const char *backend, const char *task);
/* The call now being made: module 'b' (backend) or 't' (task), call a string literal; kh_callmark_none after. */
void kh_callmark_set(char module, const char *call);
void kh_callmark_none(void);
#endif
