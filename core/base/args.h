/* core/base/args.h — tiny "--name value" / "--name=value" option parsing shared by the subcommands, the matrix and the Slurm tasks. */
#ifndef KHOST_CORE_ARGS_H
#define KHOST_CORE_ARGS_H

#include <stdint.h>

typedef struct kh_args {
    int argc, i;
    char **argv;
    const char *cmd; /* for messages */
} kh_args;

void kh_args_init(kh_args *a, const char *cmd, int argc, char **argv);
/* Next option name ("--epochs") or positional; NULL at the end. *value receives an inline "=value". */
const char *kh_args_next(kh_args *a, const char **inline_value);
/* The value of the current option (inline or the next argument); NULL + message when missing. */
const char *kh_args_value(kh_args *a, const char *opt, const char *inline_value);
/* "unknown option" for opt, the message of every command that takes the general help; returns -1. */
int kh_args_unknown(const kh_args *a, const char *opt);
/* -1 and a message when a run of one cell lacks its plugin or task, else 0. */
int kh_args_need_cell(const kh_args *a, const char *plugin, const char *task);
/* The largest value option opt may take: INT_MAX for the counts the host keeps in an int, else INT64_MAX. */
int64_t kh_args_max(const char *opt);
/* Parse an integer option value in [min, kh_args_max(opt)]; -1 and a message on error. */
int kh_args_int64(const char *opt, const char *s, int64_t min, int64_t *out);
/* A duration in seconds: a finite number >= 0 ("600", "0.5"); 0 ok, -1 otherwise (the caller says why). */
int kh_args_seconds(const char *s, double *out);
#endif
