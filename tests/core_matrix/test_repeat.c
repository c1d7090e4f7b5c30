/* tests/core_matrix/test_repeat.c — `khost matrix --repeat N` with the fixture modules: every repetition of
 * every cell a record of its own (.rep<k>), the rounds' orders drawn from the recorded seed (the same seed
 * gives the same orders, the orders differ between rounds, each round holds every cell once), the raw step
 * samples and peak RSS in each record, a failing repetition recorded with its status, --resume rerunning
 * only the missing repetition, and `run --repeat` as a one-cell matrix.
 * Usage: test_repeat REGISTRY (the fixtures' khost-test.ini); needs $KHOST_BIN. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/files.h"
#include "e2e_testlib.h"
#include "results/results.h"
#include "testutil.h"

static const char *bin, *ini;
static char out[1 << 16];

static int khost(const char *args) { return kh_e2e_khost(bin, ini, NULL, args, out, sizeof out); }

static int rep_record(const char *dir, const char *plugin, int k, kh_cell_record *r) {
    char path[4096], err[4400];
    kh_record_rep_path(path, sizeof path, dir, "fixture_blobs", plugin, "cpu", k, "json");
    int rc = kh_record_read(path, r, err, sizeof err);
    return rc == 0 ? 0 : -1;
}

/* The position of every plugin's cell in each round, read back from the records. */
static int positions(const char *dir, const char *const *plugins, int np, int rounds, int pos[][4]) {
    for (int p = 0; p < np; p++)
        for (int k = 1; k <= rounds; k++) {
            kh_cell_record r;
            if (rep_record(dir, plugins[p], k, &r) != 0) return -1;
            pos[k - 1][p] = r.rep_position;
            kh_record_free(&r);
        }
    return 0;
}

int main(int argc, char **argv) {
    bin = getenv("KHOST_BIN");
    if (argc < 2 || !bin) kh_test_skip("usage: test_repeat REGISTRY (and KHOST_BIN)");
    ini = argv[1];
    const char *tmp = kh_test_tmpdir("repeat");
    char a[4096], d1[2048], d2[2048], d3[2048];
    snprintf(d1, sizeof d1, "%s/one", tmp);
    snprintf(d2, sizeof d2, "%s/two", tmp);
    snprintf(d3, sizeof d3, "%s/run", tmp);
    const char *plugins[] = {"fixture", "fixture_codegen", "fixture_abi11"};
    enum { NP = 3, ROUNDS = 6 };

    snprintf(a, sizeof a, "matrix --plugins fixture,fixture_codegen,fixture_abi11 --tasks fixture_blobs --devices cpu "
                          "--epochs 2 --repeat %d --order-seed 11 --out '%s'", ROUNDS, d1);
    int rc = khost(a);
    CHECK(rc == 0, "matrix --repeat: exit %d: %s", rc, out);
    CHECK(strstr(out, "order seed 11") != NULL, "the order seed is printed: %s", out);
    int seen_all = 1, samples_ok = 1, rss_ok = 1;
    for (int p = 0; p < NP; p++)
        for (int k = 1; k <= ROUNDS; k++) {
            kh_cell_record r;
            if (rep_record(d1, plugins[p], k, &r) != 0) {
                seen_all = 0;
                continue;
            }
            seen_all &= !strcmp(r.status, "ok") && r.rep_index == k && r.rep_of == ROUNDS && r.rep_round == k &&
                        r.order_seed == 11;
            samples_ok &= r.n_step_s == r.steps_per_epoch * 2 && r.n_step_s > 0 && r.n_rows == 2;
            rss_ok &= r.peak_rss_bytes > (1 << 20);
            kh_record_free(&r);
        }
    CHECK(seen_all, "every repetition of every cell has its own ok record, index, round and seed");
    CHECK(samples_ok, "every repetition holds its step samples");
    CHECK(rss_ok, "every repetition holds the child's peak RSS");
    char classic[4096];
    kh_record_path(classic, sizeof classic, d1, "fixture_blobs", "fixture", "cpu", "json");
    CHECK(access(classic, F_OK) != 0, "a repeated cell writes no classic-name record");

    int p1[ROUNDS][4], p2[ROUNDS][4];
    CHECK(positions(d1, plugins, NP, ROUNDS, p1) == 0, "positions of the first run");
    int permutations = 1, differ = 0;
    for (int k = 0; k < ROUNDS; k++) {
        int mask = 0;
        for (int p = 0; p < NP; p++) mask |= p1[k][p] >= 0 && p1[k][p] < NP ? 1 << p1[k][p] : 0;
        permutations &= mask == (1 << NP) - 1;
        if (k && memcmp(p1[k], p1[0], sizeof p1[0])) differ = 1;
    }
    CHECK(permutations, "each round runs every cell once");
    CHECK(differ, "the order changes between rounds (6 rounds of 3 cells)");
    snprintf(a, sizeof a, "matrix --plugins fixture,fixture_codegen,fixture_abi11 --tasks fixture_blobs --devices cpu "
                          "--epochs 1 --repeat %d --order-seed 11 --quiet --out '%s'", ROUNDS, d2);
    rc = khost(a);
    CHECK(rc == 0 && positions(d2, plugins, NP, ROUNDS, p2) == 0 && !memcmp(p1, p2, sizeof p1),
          "the same order seed gives the same orders (exit %d)", rc);

    /* --resume: only the missing repetition runs again */
    char path[4096];
    kh_record_rep_path(path, sizeof path, d1, "fixture_blobs", "fixture_codegen", "cpu", 4, "json");
    CHECK(unlink(path) == 0, "removed %s", path);
    snprintf(a, sizeof a, "matrix --plugins fixture,fixture_codegen,fixture_abi11 --tasks fixture_blobs --devices cpu "
                          "--epochs 2 --repeat %d --order-seed 11 --resume --out '%s'", ROUNDS, d1);
    rc = khost(a);
    int skipped = 0;
    for (const char *s = out; (s = strstr(s, "skipped (recorded ok)")); s++) skipped++;
    CHECK(rc == 0 && skipped == NP * ROUNDS - 1 && access(path, F_OK) == 0,
          "--resume skips %d of %d repetitions and reruns the missing one (exit %d): %s", skipped, NP * ROUNDS, rc, out);

    /* a failing repetition is recorded with its status, never as ok */
    snprintf(a, sizeof a, "matrix --plugins fixture_segv --tasks fixture_blobs --devices cpu --repeat 2 --out '%s'", d2);
    rc = khost(a);
    kh_cell_record r;
    CHECK(rc != 0 && rep_record(d2, "fixture_segv", 1, &r) == 0 && !strcmp(r.status, "crashed") && r.rep_index == 1,
          "a crashing repetition is recorded as crashed (exit %d)", rc);
    if (rc != 0) kh_record_free(&r);

    /* energy wired into the cell: a fake powercap folder with one package whose counter stands still, so every
     * epoch reads 0 J from source "rapl" with the domain named (the counters' arithmetic: tests/core_energy) */
    char pc[2048], dom[2100], file[2200], d4[2048];
    snprintf(pc, sizeof pc, "%s/powercap", tmp);
    snprintf(dom, sizeof dom, "%s/intel-rapl:0", pc);
    snprintf(d4, sizeof d4, "%s/energy", tmp);
    CHECK(kh_mkdirs(dom) == 0, "mkdir %s", dom);
    snprintf(file, sizeof file, "%s/energy_uj", dom);
    kh_test_write_file(file, "5000000\n", 8);
    snprintf(file, sizeof file, "%s/max_energy_range_uj", dom);
    kh_test_write_file(file, "262143328850\n", 13);
    snprintf(file, sizeof file, "%s/name", dom);
    kh_test_write_file(file, "package-0\n", 10);
    snprintf(a, sizeof a, "run --plugin fixture --task fixture_blobs --device cpu --epochs 3 --out '%s'", d4);
    char envcmd[4400];
    snprintf(envcmd, sizeof envcmd, "env KHOST_POWERCAP_ROOT='%s' ", pc);
    char full[8192];
    snprintf(full, sizeof full, "%s'%s' %s", envcmd, bin, a);
    {
        char cmd[9000];
        snprintf(cmd, sizeof cmd, "KHOST_CONF='%s' KHOST_LIBCUDA=/nonexistent/libcuda.so.1 %s", ini, full);
        rc = kh_test_run(cmd, out, sizeof out);
    }
    kh_cell_record er;
    char epath[4096], eerr[4400];
    kh_record_path(epath, sizeof epath, d4, "fixture_blobs", "fixture", "cpu", "json");
    int eok = rc == 0 && kh_record_read(epath, &er, eerr, sizeof eerr) == 0;
    CHECK(eok && er.energy_json && strstr(er.energy_json, "\"source\":\"rapl\"") &&
              strstr(er.energy_json, "\"epoch_j\":[0,0,0]") && strstr(er.energy_json, "intel-rapl:0"),
          "energy per epoch from the powercap counters (exit %d): %s", rc, eok && er.energy_json ? er.energy_json : out);
    if (eok) kh_record_free(&er);

    /* run --repeat: the same rules for one cell, and the cell's options reach every repetition */
    snprintf(a, sizeof a,
             "run --plugin fixture --task fixture_blobs --device cpu --epochs 1 --seed 77 --repeat 2 --out '%s'", d3);
    rc = khost(a);
    int got = rc == 0 && rep_record(d3, "fixture", 2, &r) == 0;
    CHECK(got && r.rep_of == 2 && r.seed == 77, "run --repeat 2 --seed 77 (exit %d, seed %llu): %s", rc,
          got ? (unsigned long long)r.seed : 0ULL, out);
    if (got) kh_record_free(&r);
    snprintf(a, sizeof a, "matrix --repeat 0 --out '%s'", d3);
    CHECK(khost(a) == 2, "--repeat 0 is a usage error");
    return kh_test_finish("test_repeat");
}
