/* core/cell/runguard.c — see runguard.h. */
#define _POSIX_C_SOURCE 200809L
#include "cell/runguard.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exitcodes.h"

static volatile sig_atomic_t g_stop;

static void on_stop(int sig) {
    if (g_stop) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_stop = sig;
}

void kh_runguard_signals(void) {
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[i], &sa, &old) == 0 && old.sa_handler == SIG_IGN) sigaction(sigs[i], &old, NULL);
    }
}

int kh_runguard_stop_signal(void) { return (int)g_stop; }

static kh_cell_record *g_rec;
static const char *g_out_dir;
static int g_registered;

static void at_exit(void) {
    kh_cell_record *rec = g_rec;
    if (!rec) return;
    g_rec = NULL;
    snprintf(rec->status, sizeof rec->status, "error");
    snprintf(rec->reason, sizeof rec->reason,
             "a module called exit() during the cell (after %d of %d epochs): the process ended without the "
             "host's consent", rec->n_rows, rec->epochs_requested);
    fprintf(stderr, "khost: %s x %s x %s: error: %s\n", rec->plugin, rec->task, rec->device, rec->reason);
    char err[1024];
    if (g_out_dir && kh_record_write(rec, g_out_dir, err, sizeof err) != 0)
        fprintf(stderr, "khost: results: %s\n", err);
    fflush(NULL);
    _exit(KH_EXIT_TRAIN);
}

void kh_runguard_begin(kh_cell_record *rec, const char *out_dir) {
    if (!g_registered && atexit(at_exit) == 0) g_registered = 1;
    g_out_dir = out_dir;
    g_rec = rec;
}

void kh_runguard_end(void) { g_rec = NULL; }
