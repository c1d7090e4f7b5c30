/* core/results/identity.h — which machine and which build measured a record, as `khost compare` (is this an A/A
 * comparison?) and `khost report` (may these cells share a column?) judge it; one definition for both.
 *
 * Machine: on a CUDA device (cuda:N) the device's name (environment "device_name"); on the cpu the CPU model
 * ("cpu_model", else "device_name") and its vector extensions ("cpu_isa": "avx512", "avx2", "avx", "sse"), since
 * one model name ("AMD EPYC") covers machines of different generations.
 * Build: the khost version and git revision that wrote the record ("khost_version", "git_rev": 7 or 12 hex
 * digits, "-dirty" when the source tree had uncommitted changes). Two revisions are the same when one is a prefix
 * of the other (records say 7 or 12 digits) and both or neither are dirty; two dirty builds of one revision may
 * still differ in their uncommitted changes, which no record says.
 * A reference row (tools/reference: PyTorch, Keras 3; environment "reference") is measured by no khost build —
 * its git_rev says which checkout of tools/reference ran it — so its build differs from nothing.
 * A field a record does not have (older records; "unknown") is unknown, and an unknown field differs from
 * nothing: records without cpu_isa compare by model name. */
#ifndef KHOST_CORE_IDENTITY_H
#define KHOST_CORE_IDENTITY_H

#include <stddef.h>

typedef struct kh_identity {
    char machine[160]; /* CPU model or CUDA device name; "" unknown */
    char isa[16];      /* the cpu's vector extensions; "" unknown or a CUDA device */
    char version[32];  /* khost_version; "" unknown */
    char rev[48];      /* git_rev; "" unknown */
    int cuda;          /* measured on a CUDA device: the machine is the device */
    int reference;     /* a tools/reference row: no khost build */
} kh_identity;

/* id from a record's device ("cpu", "cuda:0") and environment values (NULL or "" where absent; reference: the
 * environment's "reference"). */
void kh_identity_set(kh_identity *id, const char *device, const char *cpu_model, const char *cpu_isa,
                     const char *device_name, const char *khost_version, const char *git_rev, const char *reference);
/* 1 when a and b are known to be different machines (both name one, and the names or both ISAs differ). */
int kh_identity_machine_differs(const kh_identity *a, const kh_identity *b);
/* 1 when a and b are known to be different builds (revisions, or versions, both known and different). */
int kh_identity_build_differs(const kh_identity *a, const kh_identity *b);
/* 1 when the machine is fully known: its name, and on the cpu its ISA too. */
int kh_identity_machine_known(const kh_identity *id);
/* 1 when the build's revision is known, or the record is a reference row (it has none to know). */
int kh_identity_build_known(const kh_identity *id);
/* "AMD EPYC (avx512)", "NVIDIA H100 80GB HBM3", "unknown machine". */
void kh_identity_machine_text(const kh_identity *id, char *buf, size_t n);
/* "khost 0.1.0 (git cc32ff613639)", "khost (git unknown)". */
void kh_identity_build_text(const kh_identity *id, char *buf, size_t n);
#endif
