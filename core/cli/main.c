/* core/cli/main.c — the khost command line: dispatch to the subcommands. Only main() exits. */
#define _GNU_SOURCE /* realpath */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "results/report/report.h" /* kh_cmd_report */
#include "devices/blas_tune.h"
#include "base/exitcodes.h"
#include "results/git_rev.h"
#include "base/log.h"
#include "base/procguard.h"
#include "modules/scan.h"
#include "guard/clocale.h"

static const char usage[] =
    "khost " KHOST_VERSION " — benchmark deep-learning backend plugins on task modules across devices\n"
    "\n"
    "usage:\n"
    "  khost [run] --plugin P --task T [--device cpu|cuda:N] [--epochs N] [--batch-size N] [--seed N]\n"
    "              [--limit-train N] [--limit-val N] [--steps N] [--warmup-steps N] [--out DIR] [--json]\n"
    "              [--repeat N] [--math fp32|tf32] [--quiet]\n"
    "      one cell in this process (--repeat N: N repetitions, each a fresh child, as a one-cell matrix).\n"
    "      --math: the FP32 math of the session, fp32 (default: strict, FMA, every backend) or tf32 (cuBLAS\n"
    "      and cuDNN may use TF32 tensor cores on CUDA; a cpu cell records fp32 and that tf32 was ignored).\n"
    "      --steps N trains N batches per epoch from the shuffled full training set; --warmup-steps N trains\n"
    "      N untimed batches first (benchmarks, tools/bench-compare).\n"
    "      P and T: a registry name (cntk), a file name in the search directories (cntk.so) or a path.\n"
    "      Default device: the registry's (auto = first CUDA device, else cpu). --json prints the cell's\n"
    "      JSON record on stdout as the last line.\n"
    "  khost matrix [--plugins LIST|all] [--tasks LIST|all] [--devices LIST|all] [--epochs N]\n"
    "               [--batch-size N] [--limit-train N] [--limit-val N] [--seed N] [--out DIR]\n"
    "               [--steps N] [--warmup-steps N] [--timing] [--repeat N|auto] [--seeds N]\n"
    "               [--order-seed S] [--math fp32|tf32] [--references LIST|all]\n"
    "               [--timeout SECONDS] [--memory-limit BYTES[K|M|G]] [--resume] [--quiet]\n"
    "      every selected cell, each in a fresh child process with a timeout (and an address-space\n"
    "      limit: a cell over it is recorded as oom); LIST is comma-separated; cells die with the matrix.\n"
    "      --repeat N runs N rounds, the cells of each in an order shuffled from the order seed (default:\n"
    "      the clock; printed and recorded); repetition k of a cell is <task>/<plugin>__<device>.rep<k>.json.\n"
    "      --seeds N trains every cell from seeds S..S+N-1 (S: --seed, else the registry's), seed k as round\n"
    "      and repetition k (not with --repeat N > 1 or auto); reference rows get the same seeds.\n"
    "      --references runs PyTorch / Keras 3 (tools/reference: pytorch, keras3-jax, keras3-tensorflow,\n"
    "      keras3-torch) as cells of the same rounds with the same options; --plugins none: only them.\n"
    "      --timing: the timing protocol, --epochs 1 --steps 100 --warmup-steps 5 for every row (a count\n"
    "      given overrides its part); --references without --epochs, --steps, --warmup-steps or --seeds\n"
    "      uses it.\n"
    "  khost matrix --slurm [matrix options] [--partition P] [--account A] [--time-per-cell T]\n"
    "               [--cpus-per-cell N] [--data DIR] [--fetch-data] [--sbatch-arg ARG]... [--slurm-script-only]\n"
    "      the same cells as a Slurm job array, one array task per cell (--devices cpu, cuda or all), into\n"
    "      the shared --out folder; prints the job ids. --resume submits only cells without a finished\n"
    "      record. --slurm-script-only writes the scripts without submitting. --seeds N: one array task per\n"
    "      cell and seed, the seed in its plan line. khost matrix --slurm --help.\n"
    "  khost report DIR|DB[:filters] [--svg FILE] [--html FILE] [--published] [--mixed]\n"
    "      the original benchmark's tables (accuracy; time per epoch with factors and model-compile time,\n"
    "      cold / warm; GFLOP/s and fraction of the roofline) from stored results; --html writes one\n"
    "      self-contained page with charts. Times are medians over a cell's repetitions [95 % bootstrap\n"
    "      CI]; factors carry a CI paired by round, \"≈\" where it contains 1; per-step samples add a time-\n"
    "      per-step table (and a strip plot in --html); noisy cells and failed repetitions are listed.\n"
    "      A device column of records from different machines or builds is refused (exit 9) unless\n"
    "      --mixed, which reports it marked \"Note: mixed\".\n"
    "      Cells with several seeds add accuracy across seeds (mean, sd, 95 % t-interval over seeds) and\n"
    "      epochs and time to target, marking a backend outside the others' range (MLPerf's check).\n"
    "  khost compare BASE NEW [--fail-above PCT] [--noise PCT] [--aa] [--json] [--html FILE]\n"
    "      two result folders cell by cell: the change of the median time with a bootstrap 95 % CI and a\n"
    "      verdict (faster / slower / unchanged below the noise threshold or not significant / too noisy\n"
    "      to tell / inconclusive / missing); exit 1 when a cell is slower than BASE by more than\n"
    "      --fail-above. One build on one machine (or --aa): an A/A section with the false-positive rate\n"
    "      and the smallest change the machine lets a cell detect.\n"
    "  khost pack DIR [--remove] | khost pack DIR --unpack\n"
    "      DIR's record files packed into DIR/records.jsonl.gz (one file for a committed set); report and\n"
    "      compare read a packed folder as they read the files. --remove deletes the packed files;\n"
    "      --unpack writes them back and removes the pack (to resume a set, then pack it again).\n"
    "  khost db import FILE DIR... [--set NAME] | khost db list FILE\n"
    "      result folders into an SQLite database (one transaction each; a record stored once by content);\n"
    "      report and compare read FILE[:set=NAME,rev=PREFIX,machine=TEXT,since=DATE,until=DATE] as a folder.\n"
    "  khost history DB[:filters] [--task T] [--plugin P] [--threshold PCT] [--fail-above PCT]\n"
    "      each cell's series of revisions on each machine, with change points (asv's step detection) and a\n"
    "      CI for each change; exit 1 when a regression is above --fail-above.\n"
    "  khost peak [--measure] [--json]\n"
    "      the cpu's roofline ceilings: the sgemm peak and each memory level's bandwidth (L1 ... DRAM), as\n"
    "      every record is held to them (cached per machine; --measure measures again).\n"
    "  khost describe --task T [--limit-train N] [--limit-val N]\n"
    "      what the task will train on: samples per split, shapes, classes, vocabulary, the model.\n"
    "  khost verify --plugin P [--device D] [--task T|all|none] [--tol X] [--seed N] [--batch N]\n"
    "               [--math fp32|tf32]\n"
    "      every layer and one training step per task on the backend against the CPU reference kit.\n"
    "  khost profile --plugin P --task T [--device D] [--steps N] [--warmup N] [--batch-size N]\n"
    "      forward and backward time per layer (graph backends: per op kind too) over N training steps on\n"
    "      one batch after warm-up (default 20 and 3), measured by the backend (ABI 1.1); the backward\n"
    "      split into input and weight gradient (ABI 1.5), each part against its FLOPs at the peak.\n"
    "  khost --list            modules, ABI versions, capabilities, load errors\n"
    "  khost --list-devices    devices (cpu is always one)\n"
    "  khost --help | --version\n"
    "  -v / --verbose before the subcommand shows info and debug messages.\n"
    "\n"
    "environment: KHOST_CONF (registry INI), KHOST_DATA (data directory), KHOST_LIBCUDA (driver library),\n"
    "  XDG_CACHE_HOME (module cache: $XDG_CACHE_HOME/khost/modules.cache, else ~/.cache/khost/...),\n"
    "  KHOST_OPENBLAS_CORETYPE (OpenBLAS kernels: chosen from the CPU unless OPENBLAS_CORETYPE is set;\n"
    "  keep = OpenBLAS's own choice), KHOST_MAPPED_OUT (run: the files the cell's process mapped, one a\n"
    "  line, written there when the cell is over).\n"
    "modules: each new or changed .so is first inspected in a child process (crashes, hangs and exits\n"
    "  become load errors) and refused when it or its folder is group/world-writable or owned by another\n"
    "  user (strict_modes = false in [khost] turns that off); only the modules a command names are opened\n"
    "  (--list and \"all\" open every one), and a backend's GPU half only when the CUDA kind is used.\n"
    "results: <out>/<task>/<plugin>__<device>.csv and .json (written atomically; the JSON also holds\n"
    "  compile_s and, for backends with generated code, compile_cache/_cold_s/_warm_s); matrix locks <out>,\n"
    "  run its cell (<out>/.khost.lock, <out>/<task>/.<plugin>__<device>.lock): a second writer is refused.\n"
    "\n"
    "exit status: 0 ok; 1 training failed (diverged, backend error; matrix: some cell failed); 2 usage;\n"
    "  3 registry/module/ABI; 4 data missing or malformed; 5 device; 6 unsupported by the backend;\n"
    "  7 verify above tolerance; 8 results could not be written or read; 9 compare --fail-above could not\n"
    "  compare (or a cell was too noisy to tell), or report was given a column of different machines or\n"
    "  builds without --mixed; 128+N run stopped by signal N (SIGINT 130, SIGTERM 143): its record says\n"
    "  \"interrupted\".\n";

int main(int argc, char **argv) {
    kh_blas_tune(); /* before any module, and so OpenBLAS, is loaded */
    /* Over a file-size limit (ulimit -f) a write fails with EFBIG and the record's writer says so; the default
     * action of SIGXFSZ would end khost without a word or a record. */
    signal(SIGXFSZ, SIG_IGN);
    if (kh_clocale_pin() != 0) fprintf(stderr, "khost: warning: cannot pin the C locale for number formatting\n");
    char gerr[256];
    if (kh_procguard_enter(gerr, sizeof gerr) != 0) { /* a child whose parent is gone, or a bad limit */
        fprintf(stderr, "khost: %s\n", gerr);
        return KH_EXIT_USAGE;
    }
    /* Hidden: the module scanner's side (scan.h); khost runs itself as the helper. */
    if (argc == 3 && !strcmp(argv[1], "--scan-module")) return kh_scan_child_main(argv[2]);
    int first = 1;
    while (first < argc && (!strcmp(argv[first], "-v") || !strcmp(argv[first], "--verbose"))) {
        kh_host_set_log_level(KH_LOG_DEBUG);
        first++;
    }
    const char *cmd = first < argc ? argv[first] : NULL;
    if (!cmd || !strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage, cmd ? stdout : stderr);
        return cmd ? KH_EXIT_OK : KH_EXIT_USAGE;
    }
    if (!strcmp(cmd, "--version")) {
        printf("khost %s (git %s), ABI %d.%d\n", KHOST_VERSION, kh_git_rev(), KH_ABI_MAJOR, KH_ABI_MINOR);
        return KH_EXIT_OK;
    }
    int sub_argc = argc - first;
    char **sub_argv = argv + first;
    /* Every command that may load modules needs the scanner, report too (--published, --html open the task
     * modules for their figures): without it a module the cache does not know yet could not be inspected. */
    char *self = realpath("/proc/self/exe", NULL);
    kh_scan_set_helper(self ? self : argv[0]);
    free(self);
    if (!strcmp(cmd, "report")) {
        int rc = kh_cmd_report(sub_argc, sub_argv);
        kh_scan_set_helper(NULL);
        return rc;
    }
    if (!strcmp(cmd, "history")) { /* records only: no registry, no modules */
        kh_scan_set_helper(NULL);
        return kh_cmd_history(sub_argc, sub_argv);
    }
    if (!strcmp(cmd, "db")) { /* records only: no registry, no modules */
        kh_scan_set_helper(NULL);
        return kh_cmd_db(sub_argc, sub_argv);
    }
    if (!strcmp(cmd, "peak")) return kh_cmd_peak(sub_argc, sub_argv); /* the machine alone */
    if (!strcmp(cmd, "pack")) { /* records only: no registry, no modules */
        kh_scan_set_helper(NULL);
        return kh_cmd_pack(sub_argc, sub_argv);
    }
    if (!strcmp(cmd, "compare")) { /* reads records only: no registry, no modules */
        int rc = kh_cmd_compare(sub_argc, sub_argv);
        kh_scan_set_helper(NULL);
        return rc;
    }

    int is_run = !strcmp(cmd, "run");
    int implicit_run = cmd[0] == '-' && strcmp(cmd, "--list") && strcmp(cmd, "--list-devices");
    if (!is_run && !implicit_run && strcmp(cmd, "matrix") && strcmp(cmd, "describe") && strcmp(cmd, "verify") &&
        strcmp(cmd, "profile") &&
        strcmp(cmd, "--list") && strcmp(cmd, "--list-devices")) {
        fprintf(stderr, "khost: unknown command '%s' (see khost --help)\n", cmd);
        kh_scan_set_helper(NULL);
        return KH_EXIT_USAGE;
    }
    kh_host h;
    int rc = kh_host_open(&h, argv[0]);
    if (rc != KH_EXIT_OK) {
        kh_host_close(&h);
        return rc;
    }
    if (!strcmp(cmd, "--list")) rc = kh_cmd_list(&h);
    else if (!strcmp(cmd, "--list-devices")) rc = kh_cmd_list_devices(&h);
    else if (!strcmp(cmd, "matrix")) rc = kh_cmd_matrix(&h, sub_argc, sub_argv);
    else if (!strcmp(cmd, "describe")) rc = kh_cmd_describe(&h, sub_argc, sub_argv);
    else if (!strcmp(cmd, "verify")) rc = kh_cmd_verify(&h, sub_argc, sub_argv);
    else if (!strcmp(cmd, "profile")) rc = kh_cmd_profile(&h, sub_argc, sub_argv);
    else if (is_run) rc = kh_cmd_run(&h, sub_argc, sub_argv);
    else rc = kh_cmd_run(&h, argc - first + 1, argv + first - 1); /* implicit run: options start at argv[first] */
    kh_host_close(&h);
    kh_scan_set_helper(NULL);
    return rc;
}
