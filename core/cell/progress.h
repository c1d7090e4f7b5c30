/* core/cell/progress.h — Keras-like progress for one epoch: a redrawn bar on a terminal, plain lines otherwise. */
#ifndef KHOST_CORE_PROGRESS_H
#define KHOST_CORE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct kh_progress {
    FILE *out;
    int tty, quiet;
    int64_t total;
    double t0, last_draw;
    double plain_interval; /* seconds between plain lines when not a terminal */
} kh_progress;

void kh_progress_begin(kh_progress *p, FILE *out, int quiet, int epoch, int epochs, int64_t total);
/* True when a redraw is due (callers read metrics from the backend only then). */
int kh_progress_due(const kh_progress *p);
void kh_progress_update(kh_progress *p, int64_t done, double loss, double acc);
/* Final line: "60000/60000 [======] - 3.2s - loss: ... - acc: ... - val_loss: ... - val_acc: ..." */
void kh_progress_end(kh_progress *p, int64_t done, double seconds, const char *metrics);
#endif
