/* core/base/exitcodes.h — khost's exit status contract (documented in --help and the README). */
#ifndef KHOST_CORE_EXITCODES_H
#define KHOST_CORE_EXITCODES_H
enum {
    KH_EXIT_OK = 0,
    KH_EXIT_TRAIN = 1,       /* training failed: diverged, backend error during training */
    KH_EXIT_USAGE = 2,       /* bad command line */
    KH_EXIT_MODULE = 3,      /* registry, module load or ABI negotiation failed */
    KH_EXIT_DATA = 4,        /* data set missing or malformed */
    KH_EXIT_DEVICE = 5,      /* device unknown or unusable */
    KH_EXIT_UNSUPPORTED = 6, /* the backend cannot run this task on this device */
    KH_EXIT_VERIFY = 7,      /* khost verify: error above tolerance */
    KH_EXIT_IO = 8,          /* results could not be written/read */
    KH_EXIT_UNCOMPARABLE = 9 /* khost compare --fail-above: the gate could not compare (no shared cell, a side
                                without finished repetitions, other settings, impossible times, a cell too noisy
                                to tell); khost report: a column of different machines or builds without --mixed */
};
#endif
