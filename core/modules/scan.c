/* core/modules/scan.c — module inspection in a helper process (scan.h).
 *
 * The parent reads the helper's stdout and stderr through pipes with poll(), waits for it with a deadline,
 * and always ends by killing the helper's process group: a constructor that forked, or that closed its
 * pipes and hung, must not outlive the inspection. The helper dies with its parent (KHOST_PARENT_PID, see
 * procguard.h), so a killed khost leaves no scanner behind either.
 */
#define _GNU_SOURCE /* pipe2, sigabbrev_np, strsignal, environ */
#include "modules/scan.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "modules/caps.h"
#include "modules/host_api.h"
#include "modules/module.h"
#include "base/procguard.h"

extern char **environ;

#define SCAN_REPORT_MAX 65536
#define SCAN_STDERR_TAIL 2048

static char *g_helper;

void kh_scan_set_helper(const char *exe) {
    free(g_helper);
    g_helper = exe ? strdup(exe) : NULL;
}

const char *kh_scan_helper(void) {
    if (g_helper) return g_helper;
    const char *env = getenv("KHOST_SCANNER");
    return env && *env ? env : NULL;
}

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void set_message(kh_modcache_entry *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_message(kh_modcache_entry *e, const char *fmt, ...) {
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(e->message);
    e->message = strdup(buf); /* NULL on no memory: the caller then reports "unknown error" */
    e->status = KH_SCAN_ERROR;
}

// --- the helper's side ----------------------------------------------------------------------------------

static void report_kv(FILE *f, const char *key, const char *value) {
    char *esc = kh_modcache_escape(value);
    fprintf(f, "%s %s\n", key, esc ? esc : "");
    free(esc);
}

int kh_scan_child_main(const char *path) {
    /* The report keeps the real stdout; whatever the module prints goes nowhere. */
    int rfd = dup(STDOUT_FILENO);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (rfd < 0 || null < 0 || dup2(null, STDOUT_FILENO) < 0) {
        fprintf(stderr, "khost --scan-module: cannot set up the report: %s\n", strerror(errno));
        return 3;
    }
    close(null);
    FILE *rep = fdopen(rfd, "w");
    if (!rep) {
        fprintf(stderr, "khost --scan-module: cannot set up the report: %s\n", strerror(errno));
        return 3;
    }
    kh_module m;
    int no_entry = 0;
    char err[1024];
    int rc = kh_module_load_ex(path, kh_host_api_get(), &m, &no_entry, err, sizeof err);
    fprintf(rep, "khost-scan 1\n");
    if (rc != 0) {
        report_kv(rep, "status", no_entry ? "noentry" : "error");
        if (!no_entry) report_kv(rep, "message", err);
    } else {
        char buf[64], caps[512] = "";
        report_kv(rep, "status", "ok");
        snprintf(buf, sizeof buf, "%d", m.kind);
        report_kv(rep, "kind", buf);
        snprintf(buf, sizeof buf, "%u.%u", (unsigned)m.desc->abi_major, (unsigned)m.desc->abi_minor);
        report_kv(rep, "abi", buf);
        report_kv(rep, "name", m.desc->name);
        report_kv(rep, "version", m.desc->version);
        report_kv(rep, "description", m.desc->description);
        if (m.backend) {
            kh_caps c;
            memset(&c, 0, sizeof c);
            c.struct_size = sizeof c;
            if (m.backend->get_caps(KH_DEVICE_CPU, &c) == KH_OK && c.available)
                kh_caps_describe(&c, caps, sizeof caps);
            else
                snprintf(caps, sizeof caps, "cpu: not available");
        }
        report_kv(rep, "caps", caps);
    }
    fprintf(rep, "end\n");
    int werr = fflush(rep) != 0 || ferror(rep);
    /* Unload as the host would at exit: a destructor that crashes shows up here, not in khost. */
    if (rc == 0) kh_module_unload(&m);
    if (fclose(rep) != 0 || werr) return 3;
    return 0;
}

// --- the parent's side ----------------------------------------------------------------------------------

int kh_scan_parse_report(char *text, size_t len, const char *path, kh_modcache_entry *e) {
    if (memchr(text, 0, len)) {
        set_message(e, "%s: returned garbage while being inspected (NUL byte in the report); not loaded", path);
        return -1;
    }
    char *status = NULL, *kind = NULL, *abi = NULL, *f_name = NULL, *version = NULL, *desc = NULL, *caps = NULL,
         *message = NULL;
    int ended = 0, line_no = 0;
    for (char *p = text; *p && !ended;) {
        char *nl = strchr(p, '\n');
        if (!nl) break; /* an unterminated last line: the report was cut short */
        *nl = 0;
        line_no++;
        if (line_no == 1) {
            if (strcmp(p, "khost-scan 1")) break;
        } else if (!strcmp(p, "end")) {
            ended = 1;
        } else {
            char *sp = strchr(p, ' ');
            if (!sp) break;
            *sp = 0;
            char *v = sp + 1;
            if (kh_modcache_unescape(v)) break;
            char **slot = !strcmp(p, "status") ? &status : !strcmp(p, "kind") ? &kind : !strcmp(p, "abi") ? &abi
                          : !strcmp(p, "name") ? &f_name : !strcmp(p, "version") ? &version
                          : !strcmp(p, "description") ? &desc : !strcmp(p, "caps") ? &caps
                          : !strcmp(p, "message") ? &message : NULL;
            if (!slot || *slot) break; /* unknown or repeated key */
            *slot = v;
        }
        p = nl + 1;
    }
    if (!ended || !status) {
        set_message(e, "%s: returned garbage while being inspected (no complete report); not loaded", path);
        return -1;
    }
    if (!strcmp(status, "noentry")) {
        e->status = KH_SCAN_NOENTRY;
        return 0;
    }
    if (!strcmp(status, "error") && message && *message) {
        set_message(e, "%s", message);
        return 0;
    }
    char *end = NULL;
    long k = kind ? strtol(kind, &end, 10) : 0;
    unsigned maj = 0, min = 0;
    if (strcmp(status, "ok") || !end || *end || (k != KH_MODULE_BACKEND && k != KH_MODULE_TASK) || !abi ||
        sscanf(abi, "%u.%u", &maj, &min) != 2 || !f_name || !*f_name) {
        set_message(e, "%s: returned garbage while being inspected (an invalid report); not loaded", path);
        return -1;
    }
    e->status = KH_SCAN_OK;
    e->kind = (int)k;
    e->abi_major = maj;
    e->abi_minor = min;
    free(e->name), free(e->version), free(e->description), free(e->caps);
    e->name = strdup(f_name);
    e->version = strdup(version ? version : "");
    e->description = strdup(desc ? desc : "");
    e->caps = strdup(caps ? caps : "");
    if (!e->name || !e->version || !e->description || !e->caps) {
        set_message(e, "%s: out of memory reading its inspection report", path);
        return -1;
    }
    return 0;
}

static const char *sig_abbrev(int sig, char *buf, size_t n) {
    const char *ab = sigabbrev_np(sig);
    if (ab) snprintf(buf, n, "SIG%s", ab);
    else snprintf(buf, n, "signal %d", sig);
    return buf;
}

/* environ with KHOST_PARENT_PID=<us> (the helper dies with us); NULL out of memory. */
static char **helper_env(char *kv, size_t kvlen) {
    size_t n = 0;
    while (environ[n]) n++;
    char **e = calloc(n + 2, sizeof *e);
    if (!e) return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], KH_PARENT_PID_ENV "=", sizeof KH_PARENT_PID_ENV)) e[j++] = environ[i];
    snprintf(kv, kvlen, "%s=%ld", KH_PARENT_PID_ENV, (long)getpid());
    e[j++] = kv;
    e[j] = NULL;
    return e;
}

int kh_scan_inspect(const char *path, double timeout_s, kh_modcache_entry *e) {
    e->status = KH_SCAN_ERROR;
    const char *helper = kh_scan_helper();
    if (!helper) {
        set_message(e, "%s: cannot inspect: no scanner (the khost binary, or $KHOST_SCANNER); not loaded", path);
        return -1;
    }
    if (timeout_s <= 0) timeout_s = KH_SCAN_DEFAULT_TIMEOUT_S;
    int outp[2] = {-1, -1}, errp[2] = {-1, -1}, rc = -1, have_fa = 0, have_at = 0;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    char kv[64], **envp = NULL, *report = NULL, tail[SCAN_STDERR_TAIL + 1];
    size_t rlen = 0, tlen = 0;
    pid_t pid = -1;
    int err_no = 0;
    const char *what = "";
    if (pipe2(outp, O_CLOEXEC) || pipe2(errp, O_CLOEXEC)) {
        err_no = errno, what = "pipe";
        goto fail;
    }
    if (!(report = malloc(SCAN_REPORT_MAX + 1)) || !(envp = helper_env(kv, sizeof kv))) {
        err_no = ENOMEM, what = "memory";
        goto fail;
    }
    if ((err_no = posix_spawn_file_actions_init(&fa))) goto fail;
    have_fa = 1;
    if ((err_no = posix_spawnattr_init(&at))) goto fail;
    have_at = 1;
    sigset_t none, def;
    sigemptyset(&none);
    sigfillset(&def);
    sigdelset(&def, SIGKILL);
    sigdelset(&def, SIGSTOP);
    if ((err_no = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) ||
        (err_no = posix_spawn_file_actions_adddup2(&fa, outp[1], 1)) ||
        (err_no = posix_spawn_file_actions_adddup2(&fa, errp[1], 2)) ||
        (err_no = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                    POSIX_SPAWN_SETSIGDEF)) ||
        (err_no = posix_spawnattr_setpgroup(&at, 0)) || (err_no = posix_spawnattr_setsigmask(&at, &none)) ||
        (err_no = posix_spawnattr_setsigdefault(&at, &def))) {
        what = "spawn attributes";
        goto fail;
    }
    char *argv[] = {(char *)helper, "--scan-module", (char *)path, NULL};
    if ((err_no = posix_spawn(&pid, helper, &fa, &at, argv, envp))) {
        what = helper;
        goto fail;
    }
    close(outp[1]), close(errp[1]);
    outp[1] = errp[1] = -1;

    double deadline = mono_now() + timeout_s;
    int open_fds = 2, timed_out = 0, status = 0, reaped = 0;
    while (open_fds > 0) {
        double left = deadline - mono_now();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pf[2] = {{outp[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
        int pr = poll(pf, 2, (int)(left * 1000) + 1);
        if (pr < 0 && errno != EINTR) break;
        for (int i = 0; i < 2 && pr > 0; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[4096];
            ssize_t got = read(pf[i].fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                close(i == 0 ? outp[0] : errp[0]);
                if (i == 0) outp[0] = -1;
                else errp[0] = -1;
                open_fds--;
                continue;
            }
            if (i == 0) { /* the report: a bounded amount, the rest is garbage anyway */
                size_t take = (size_t)got < SCAN_REPORT_MAX - rlen ? (size_t)got : SCAN_REPORT_MAX - rlen;
                memcpy(report + rlen, buf, take);
                rlen += take;
            } else { /* stderr: keep the tail, where the reason usually is */
                if ((size_t)got >= SCAN_STDERR_TAIL) {
                    memcpy(tail, buf + got - SCAN_STDERR_TAIL, SCAN_STDERR_TAIL);
                    tlen = SCAN_STDERR_TAIL;
                } else {
                    size_t keep = tlen + (size_t)got > SCAN_STDERR_TAIL ? SCAN_STDERR_TAIL - (size_t)got : tlen;
                    memmove(tail, tail + tlen - keep, keep);
                    memcpy(tail + keep, buf, (size_t)got);
                    tlen = keep + (size_t)got;
                }
            }
        }
    }
    /* Both pipes closed (or time is up): the helper should be gone too; give it what is left of the time. */
    while (!timed_out && !reaped) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) reaped = 1;
        else if (w < 0 && errno != EINTR) break;
        else if (mono_now() >= deadline) timed_out = 1;
        else {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    kill(-pid, SIGKILL); /* the helper if it hung, and anything the module started */
    if (!reaped)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    report[rlen] = 0;
    tail[tlen] = 0;
    while (tlen && (tail[tlen - 1] == '\n' || tail[tlen - 1] == ' ')) tail[--tlen] = 0;
    char *last = strrchr(tail, '\n');
    last = last ? last + 1 : tail;

    char sig[32];
    if (timed_out) {
        set_message(e, "%s: hung while being inspected: no answer after %g s (killed; scan_timeout in [khost] "
                       "sets the limit); not loaded", path, timeout_s);
    } else if (WIFSIGNALED(status)) {
        int s = WTERMSIG(status);
        const char *desc = strsignal(s);
        set_message(e, "%s: crashed while being inspected: %s (%s)%s%s; not loaded", path,
                    sig_abbrev(s, sig, sizeof sig), desc ? desc : "unknown signal", *last ? ": " : "", last);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !rlen) {
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (rlen && code != 0 && kh_scan_parse_report(report, rlen, path, e) == 0 && e->status != KH_SCAN_OK) {
            /* a clean refusal, then a failure while unloading: the refusal is the useful part */
        } else {
            set_message(e, "%s: exited with status %d while being inspected, before reporting (a constructor "
                           "that calls exit?)%s%s; not loaded", path, code, *last ? ": " : "", last);
        }
    } else {
        kh_scan_parse_report(report, rlen, path, e);
    }
    rc = 0;
    goto done;
fail:
    set_message(e, "%s: cannot inspect: %s: %s; not loaded", path, what, strerror(err_no));
done:
    for (int i = 0; i < 2; i++) {
        if (outp[i] >= 0) close(outp[i]);
        if (errp[i] >= 0) close(errp[i]);
    }
    if (have_fa) posix_spawn_file_actions_destroy(&fa);
    if (have_at) posix_spawnattr_destroy(&at);
    free(envp);
    free(report);
    return rc;
}
