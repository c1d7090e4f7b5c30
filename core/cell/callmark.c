/* core/cell/callmark.c — a crash inside a module named by the call it happened in (callmark.h). */
#define _XOPEN_SOURCE 700 /* sigaltstack, SA_ONSTACK */
#include "cell/callmark.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *g_backend = "?", *g_task = "?";
static const char *volatile g_call;
static volatile char g_module;

static void put(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

static const int g_sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define N_SIGS (sizeof g_sigs / sizeof *g_sigs)
static struct sigaction g_old[N_SIGS]; /* what was there before (the default, or a sanitizer's handler) */

/* Async-signal-safe: write(2) of strings set before the call, then the previous action back in place. A fault
 * (si_code > 0) re-runs its instruction when the handler returns and meets that action; a signal sent by
 * raise() or kill() would not come again, so it is raised again here. */
static void on_fatal(int sig, siginfo_t *info, void *uctx) {
    (void)uctx;
    const char *call = g_call;
    if (call) {
        put(KH_CALLMARK_PREFIX);
        put(g_module == 'b' ? "backend '" : "task '");
        put(g_module == 'b' ? g_backend : g_task);
        put("' ");
        put(call);
        put("\n");
    }
    for (size_t i = 0; i < N_SIGS; i++)
        if (g_sigs[i] == sig) sigaction(sig, &g_old[i], NULL);
    if (!info || info->si_code <= 0) raise(sig);
}

void kh_callmark_install(const char *backend, const char *task) {
    g_backend = backend ? backend : "?";
    g_task = task ? task : "?";
    static char *alt;
    if (!alt && (alt = malloc(64 * 1024))) {
        stack_t ss = {.ss_sp = alt, .ss_size = 64 * 1024, .ss_flags = 0};
        sigaltstack(&ss, NULL);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_SIGS; i++) sigaction(g_sigs[i], &sa, &g_old[i]);
}

void kh_callmark_set(char module, const char *call) {
    g_module = module;
    g_call = call;
}

void kh_callmark_none(void) { g_call = NULL; }
