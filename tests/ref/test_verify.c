/* tests/ref/test_verify.c — `khost verify` end to end against refbackend.so (the reference kit behind the
 * float32 ABI): it must pass with NHWC and with NCHW images (the host's conversions), and it must FAIL
 * (exit 7) when the backend is broken on purpose: gradients scaled by 1.01, a transposed image layout, a
 * learning rate off by 1%. The task part runs mnist_mlp on one batch when the MNIST data is reachable
 * ($KHOST_DATA, else the shared mirror next to the source tree); otherwise it is skipped with a message.
 * argv[1]: the refbackend module. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static char out[1 << 20];

static int verify(const char *env, const char *plugin, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s '%s' verify --plugin '%s' --device cpu %s", env, getenv("KHOST_BIN"), plugin, args);
    int rc = kh_test_run(cmd, out, sizeof out);
    return rc;
}

static int has_line(const char *prefix, const char *result) {
    // a table row starting with prefix and ending in result
    for (const char *p = out; (p = strstr(p, prefix)); p++) {
        if (p != out && p[-1] != '\n') continue;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        size_t rl = strlen(result);
        if (len >= rl && !strncmp(p + len - rl, result, rl)) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !getenv("KHOST_BIN")) kh_test_skip("needs the refbackend path and KHOST_BIN");
    const char *plugin = argv[1];

    int rc = verify("", plugin, "--task none");
    CHECK(rc == 0, "verify of the reference against itself passes (rc %d):\n%s", rc, out);
    CHECK(has_line("dense[softmax] grad L0.kernel", "PASS"), "dense row present:\n%s", out);
    CHECK(has_line("conv2d[same,relu] d_input", "PASS"), "conv row present");
    CHECK(has_line("bilstm[sequences] grad L0.backward_recurrent_kernel", "PASS"), "bilstm row present");
    CHECK(has_line("lstm[onehot] output", "PASS"), "one-hot expansion by the host");
    CHECK(strstr(out, "0 failed") != NULL, "summary says 0 failed");

    rc = verify("KHOST_REFBACKEND_LAYOUT=nchw", plugin, "--task none");
    CHECK(rc == 0, "NCHW backend: the host converts inputs, output gradients and back (rc %d):\n%s", rc, out);
    CHECK(has_line("maxpool2d[2x2,odd] d_input", "PASS"), "pool through NCHW");

    rc = verify("KHOST_REFBACKEND_PERTURB=grad", plugin, "--task none");
    CHECK(rc == 7, "gradients off by 1%% must fail verify with exit 7 (rc %d)", rc);
    CHECK(has_line("dense[relu] grad L0.kernel", "FAIL") && has_line("dense[relu] output", "PASS"),
          "the failing rows are the gradients:\n%s", out);

    rc = verify("KHOST_REFBACKEND_PERTURB=layout", plugin, "--task none");
    CHECK(rc == 7, "a transposed image layout must fail verify (rc %d)", rc);
    CHECK(has_line("conv2d[valid,relu] output", "FAIL") && has_line("dense[relu] output", "PASS"),
          "the failing rows are the image layers:\n%s", out);

    rc = verify("", plugin, "--task none --tol 1e-12");
    CHECK(rc == 7, "a float32 backend cannot meet 1e-12: the tolerance is applied (rc %d)", rc);

    // one training step on real data
    char data[1024] = "";
    const char *kd = getenv("KHOST_DATA");
    if (kd && *kd) snprintf(data, sizeof data, "%s", kd);
    else if (getenv("KHOST_SOURCE")) snprintf(data, sizeof data, "%s/../shared/datasets", getenv("KHOST_SOURCE"));
    char probe[1200];
    snprintf(probe, sizeof probe, "%s/mnist/train-images-idx3-ubyte.gz", data);
    if (access(probe, R_OK) != 0) {
        printf("task part skipped: no MNIST under %s\n", data[0] ? data : "(unset)");
    } else {
        char env[1200];
        snprintf(env, sizeof env, "KHOST_DATA='%s'", data);
        rc = verify(env, plugin, "--task mnist_mlp --batch 16");
        if (strstr(out, "mnist_mlp") && strstr(out, "skipped") && !strstr(out, "mnist_mlp loss")) {
            printf("task part skipped by verify:\n%s", out);
        } else {
            CHECK(rc == 0, "mnist_mlp training step matches (rc %d):\n%s", rc, out);
            CHECK(has_line("mnist_mlp loss", "PASS") && has_line("mnist_mlp step L4.kernel", "PASS"),
                  "loss and step rows:\n%s", out);
            snprintf(env, sizeof env, "KHOST_DATA='%s' KHOST_REFBACKEND_PERTURB=lr", data);
            rc = verify(env, plugin, "--task mnist_mlp --batch 16");
            CHECK(rc == 7 && has_line("mnist_mlp step L0.kernel", "FAIL") && has_line("mnist_mlp loss", "PASS"),
                  "a learning rate off by 1%% fails the step rows only (rc %d):\n%s", rc, out);
        }
    }
    return kh_test_finish("test_ref_verify");
}
