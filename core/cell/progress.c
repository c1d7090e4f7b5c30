/* core/cell/progress.c — the epoch progress display (see progress.h). */
#define _POSIX_C_SOURCE 200809L
#include "cell/progress.h"

#include <math.h>
#include <unistd.h>

#include "cell/env.h"
#include "khost/kit/clock.h"

#define BAR 30

void kh_progress_begin(kh_progress *p, FILE *out, int quiet, int epoch, int epochs, int64_t total) {
    p->out = out;
    p->quiet = quiet;
    p->tty = isatty(fileno(out));
    p->total = total;
    p->t0 = p->last_draw = kh_now();
    p->plain_interval = 30.0;
    if (!quiet) {
        fprintf(out, "Epoch %d/%d\n", epoch, epochs);
        fflush(out);
    }
}

int kh_progress_due(const kh_progress *p) {
    if (p->quiet) return 0;
    double now = kh_now();
    return now - p->last_draw >= (p->tty ? 0.25 : p->plain_interval);
}

static void bar(FILE *out, int64_t done, int64_t total) {
    int filled = total > 0 ? (int)((double)BAR * (double)done / (double)total) : BAR;
    fputc('[', out);
    for (int i = 0; i < BAR; i++) fputc(i < filled ? '=' : (i == filled ? '>' : '.'), out);
    fputc(']', out);
}

void kh_progress_update(kh_progress *p, int64_t done, double loss, double acc) {
    if (p->quiet) return;
    double now = kh_now(), el = now - p->t0;
    p->last_draw = now;
    double eta = done > 0 ? el * (double)(p->total - done) / (double)done : 0;
    if (p->tty) {
        fprintf(p->out, "\r%lld/%lld ", (long long)done, (long long)p->total);
        bar(p->out, done, p->total);
        fprintf(p->out, " - ETA: %.0fs - loss: %.4f", eta, loss);
        if (!isnan(acc)) fprintf(p->out, " - acc: %.4f", acc);
        fprintf(p->out, "   ");
    } else {
        fprintf(p->out, "%lld/%lld - %.0fs elapsed - ETA: %.0fs - loss: %.4f", (long long)done,
                (long long)p->total, el, eta, loss);
        if (!isnan(acc)) fprintf(p->out, " - acc: %.4f", acc);
        fputc('\n', p->out);
    }
    fflush(p->out);
}

void kh_progress_end(kh_progress *p, int64_t done, double seconds, const char *metrics) {
    if (p->quiet) return;
    if (p->tty) fputc('\r', p->out);
    fprintf(p->out, "%lld/%lld ", (long long)done, (long long)p->total);
    bar(p->out, done, p->total);
    fprintf(p->out, " - %.1fs - %s\n", seconds, metrics);
    fflush(p->out);
}
