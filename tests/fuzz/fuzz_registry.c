/* tests/fuzz/fuzz_registry.c — libFuzzer target for the INI registry parser.
 *
 * kh_registry_load reads a file (it must know the file's folder to resolve paths), so each input is
 * written to one temporary file that is reused for the whole run. Besides crashes and sanitizer reports,
 * the target checks the parser's promises: an error always says which file, a success always yields
 * absolute folders and valid module names. A broken promise traps: that is how a fuzz target reports.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "khost/abi.h"
#include "modules/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[256], fuzz_file[300];

static void cleanup(void) {
    if (fuzz_file[0]) unlink(fuzz_file);
    if (fuzz_dir[0]) rmdir(fuzz_dir);
}

static int setup(void) {
    const char *base = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/khost-fuzz-registry-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(fuzz_dir)) return -1;
    char *real = realpath(fuzz_dir, NULL);
    if (!real) return -1;
    snprintf(fuzz_file, sizeof fuzz_file, "%s/fuzz.ini", real);
    free(real);
    atexit(cleanup);
    return 0;
}

#define PROMISE(cond) \
    do {              \
        if (!(cond)) __builtin_trap(); \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        if (setup()) return 0;
        ready = 1;
    }
    FILE *f = fopen(fuzz_file, "wb");
    if (!f) return 0;
    size_t wrote = fwrite(data, 1, size, f);
    if (fclose(f) != 0 || wrote != size) return 0;

    kh_registry r;
    char err[1024];
    if (kh_registry_load(fuzz_file, &r, err, sizeof err) != 0) {
        PROMISE(strncmp(err, fuzz_file, strlen(fuzz_file)) == 0); /* every message names the file */
        PROMISE(r.file == NULL && r.kv == NULL);
        return 0;
    }
    PROMISE(r.file && !strcmp(r.file, fuzz_file));
    PROMISE(r.data_dir && r.data_dir[0] == '/' && r.results_dir && r.results_dir[0] == '/');
    PROMISE(r.default_device && r.default_device[0]);
    for (int i = 0; i < r.n_plugin_dirs; i++) PROMISE(r.plugin_dirs[i][0] == '/');
    for (int i = 0; i < r.n_task_dirs; i++) PROMISE(r.task_dirs[i][0] == '/');
    for (int i = 0; i < r.n_modules; i++) {
        const kh_reg_module *m = &r.modules[i];
        PROMISE(m->name[0] && strspn(m->name, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(m->name));
        PROMISE(m->kind == KH_MODULE_BACKEND || m->kind == KH_MODULE_TASK);
        PROMISE(!m->path || m->path[0] == '/');
        PROMISE(m->enabled == 0 || m->enabled == 1);
    }
    for (int i = 0; i < r.n_kv; i++) PROMISE(kh_registry_get(&r, r.kv[i].section, r.kv[i].key) == r.kv[i].value);
    for (int i = 0; i < r.n_warnings; i++) PROMISE(!strncmp(r.warnings[i], fuzz_file, strlen(fuzz_file)));
    kh_registry_free(&r);
    return 0;
}
