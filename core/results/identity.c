/* core/results/identity.c — the machine and build of a record (identity.h). */
#include "results/identity.h"

#include <stdio.h>
#include <string.h>

/* s, or "" when it is absent or says "unknown". */
static const char *known(const char *s) { return s && *s && strcmp(s, "unknown") != 0 ? s : ""; }

void kh_identity_set(kh_identity *id, const char *device, const char *cpu_model, const char *cpu_isa,
                     const char *device_name, const char *khost_version, const char *git_rev, const char *reference) {
    memset(id, 0, sizeof *id);
    int cuda = device && !strncmp(device, "cuda", 4);
    const char *name = cuda ? known(device_name) : *known(cpu_model) ? known(cpu_model) : known(device_name);
    id->cuda = cuda;
    id->reference = reference && *reference;
    snprintf(id->machine, sizeof id->machine, "%s", name);
    snprintf(id->isa, sizeof id->isa, "%s", cuda ? "" : known(cpu_isa));
    snprintf(id->version, sizeof id->version, "%s", known(khost_version));
    snprintf(id->rev, sizeof id->rev, "%s", known(git_rev));
}

int kh_identity_machine_differs(const kh_identity *a, const kh_identity *b) {
    if (!a->machine[0] || !b->machine[0]) return 0;
    if (strcmp(a->machine, b->machine) != 0) return 1;
    return a->isa[0] && b->isa[0] && strcmp(a->isa, b->isa) != 0;
}

/* The hex digits of a revision (before "-dirty") and whether it is dirty. */
static size_t rev_digits(const char *rev, int *dirty) {
    const char *d = strstr(rev, "-dirty");
    *dirty = d != NULL;
    return d ? (size_t)(d - rev) : strlen(rev);
}

int kh_identity_build_differs(const kh_identity *a, const kh_identity *b) {
    if (a->reference || b->reference) return 0;
    if (a->version[0] && b->version[0] && strcmp(a->version, b->version) != 0) return 1;
    if (!a->rev[0] || !b->rev[0]) return 0;
    int da, db;
    size_t na = rev_digits(a->rev, &da), nb = rev_digits(b->rev, &db);
    size_t n = na < nb ? na : nb;
    return da != db || n == 0 || strncmp(a->rev, b->rev, n) != 0;
}

int kh_identity_machine_known(const kh_identity *id) { return id->machine[0] && (id->cuda || id->isa[0]); }

int kh_identity_build_known(const kh_identity *id) { return id->reference || id->rev[0] != 0; }

void kh_identity_machine_text(const kh_identity *id, char *buf, size_t n) {
    if (!id->machine[0]) snprintf(buf, n, "unknown machine");
    else if (id->isa[0]) snprintf(buf, n, "%s (%s)", id->machine, id->isa);
    else snprintf(buf, n, "%s", id->machine);
}

void kh_identity_build_text(const kh_identity *id, char *buf, size_t n) {
    snprintf(buf, n, "khost%s%s (git %s)", id->version[0] ? " " : "", id->version, id->rev[0] ? id->rev : "unknown");
}
