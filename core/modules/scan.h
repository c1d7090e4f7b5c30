/* core/modules/scan.h — inspecting a module file in a child process, as GStreamer's gst-plugin-scanner does.
 *
 * dlopen runs a library's constructors in the caller, so a module is first opened by a helper: the khost
 * binary itself, run as `khost --scan-module PATH` in its own process group, with a timeout. It loads the
 * module exactly as the host would (entry symbol, ABI negotiation), asks a backend for its cpu
 * capabilities, and writes a short report on its stdout (the module's own stdout goes to /dev/null):
 *   khost-scan 1 / status ok|noentry|error / kind N / abi M.m / name / version / description / caps /
 *   message / end     (one "key value" per line, values escaped as in the module cache)
 * A helper that crashes, hangs, exits early or reports garbage tells the parent what the module would
 * have done to it; the parent never dlopens such a module.
 */
#ifndef KHOST_CORE_SCAN_H
#define KHOST_CORE_SCAN_H

#include <stddef.h>

#include "modules/modcache.h"

#define KH_SCAN_DEFAULT_TIMEOUT_S 10.0

/* The helper to run: set by main() to the khost binary; else $KHOST_SCANNER (tests that link the core
 * library). NULL: none known. */
void kh_scan_set_helper(const char *exe);
const char *kh_scan_helper(void);

/* Inspect path (absolute) in a helper process. Fills e's status and fields (not its path or stat fields).
 * Returns 0 when the outcome describes the module (cache it), -1 when the helper could not be run at all
 * (e->message says why; do not cache). */
int kh_scan_inspect(const char *path, double timeout_s, kh_modcache_entry *e);

/* Parse a helper's report (text[len] must be NUL; modified in place) into e's status and fields; -1, with
 * e->message saying so, when it is not a complete, valid report. Public for the fuzz target. */
int kh_scan_parse_report(char *text, size_t len, const char *path, kh_modcache_entry *e);

/* The helper's side (`khost --scan-module PATH`): load, report on stdout, unload. Returns the exit code. */
int kh_scan_child_main(const char *path);
#endif
