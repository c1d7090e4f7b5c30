/* tests/core_loader/test_exports.c — a module exports exactly one function: khost_module_entry.
 * Hidden visibility is what keeps a module's internals from colliding with another module's or the host's;
 * this checks the built fixtures with `nm -D --defined-only`, the way a module author can check theirs. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static void check_module(const char *path) {
    char cmd[1200], out[16384];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", path);
    int rc = kh_test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "%s failed (%d): %s", cmd, rc, out);
    int text = 0, entry = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char addr[64], type[8], name[512];
        if (sscanf(line, "%63s %7s %511s", addr, type, name) != 3) continue;
        if (strcmp(type, "T") && strcmp(type, "t") && strcmp(type, "W") && strcmp(type, "i")) continue;
        text++;
        if (!strcmp(name, "khost_module_entry")) entry++;
        else CHECK(0, "%s exports text symbol %s", path, name);
    }
    CHECK(entry == 1 && text == 1, "%s: %d text symbols, entry found %d times", path, text, entry);
}

int main(void) {
    char out[256];
    if (kh_test_run("command -v nm", out, sizeof out) != 0) kh_test_skip("nm not found");
    check_module(KH_FIXTURE_DIR "/fx_backend.so");
    check_module(KH_FIXTURE_DIR "/fx_task.so");
    return kh_test_finish("core_loader_exports");
}
