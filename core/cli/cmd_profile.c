/* core/cli/cmd_profile.c — `khost profile --plugin P --task T [--device D] [--steps N] [--warmup N]
 * [--batch-size N]`: forward and backward time per layer (and per op kind, for graph backends), measured by
 * the backend over N training steps on one real batch after warm-up (kh_backend_api.profile, ABI 1.1).
 * A backend without the call (an ABI 1.0 module, or one that chose not to) is told apart from a failure; what
 * a backend wrote is checked before any of it is printed (cli/profile_rows.c, which also prints it). From ABI
 * 1.5 the host gives the backend a grads array, each row's backward split into input and weight gradient. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/args.h"
#include "modules/caps.h"
#include "cell/cell.h"
#include "cli/commands.h"
#include "modules/layer_abi.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "modules/host_api.h"
#include "khost/kit/flops.h"
#include "khost/kit/spec.h"
#include "cell/layout.h"
#include "cli/profile_rows.h"

typedef struct prof_args {
    const char *plugin, *task, *device;
    int64_t steps, warmup, batch;
} prof_args;

static int parse(int argc, char **argv, prof_args *p) {
    kh_args a;
    kh_args_init(&a, "profile", argc, argv);
    const char *opt, *iv, *v;
    while ((opt = kh_args_next(&a, &iv))) {
        if (!strcmp(opt, "--plugin") || !strcmp(opt, "--task") || !strcmp(opt, "--device")) {
            if (!(v = kh_args_value(&a, opt, iv))) return -1;
            if (!strcmp(opt, "--plugin")) p->plugin = v;
            else if (!strcmp(opt, "--task")) p->task = v;
            else p->device = v;
        } else if (!strcmp(opt, "--steps") || !strcmp(opt, "--warmup") || !strcmp(opt, "--batch-size")) {
            int64_t n;
            if (!(v = kh_args_value(&a, opt, iv)) || kh_args_int64(opt, v, !strcmp(opt, "--warmup") ? 0 : 1, &n))
                return -1;
            if (!strcmp(opt, "--steps")) p->steps = n;
            else if (!strcmp(opt, "--warmup")) p->warmup = n;
            else p->batch = n;
        } else {
            return kh_args_unknown(&a, opt);
        }
    }
    return kh_args_need_cell(&a, p->plugin, p->task);
}

int kh_cmd_profile(kh_host *h, int argc, char **argv) {
    prof_args p = {.steps = 20, .warmup = 3};
    if (parse(argc, argv, &p) != 0) return KH_EXIT_USAGE;
    const kh_host_api *api = kh_host_api_get();
    char err[1024];
    kh_module *bm = kh_modules_find(&h->mods, KH_MODULE_BACKEND, p.plugin, api, err, sizeof err);
    kh_module *tm = bm ? kh_modules_find(&h->mods, KH_MODULE_TASK, p.task, api, err, sizeof err) : NULL;
    if (!bm || !tm) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_MODULE;
    }
    const kh_backend_api *b = bm->backend;
    const kh_task_api *t = tm->task;
    if (!KH_HAS_MEMBER(kh_backend_api, b->struct_size, profile) || !b->profile) {
        kh_logf(KH_LOG_ERROR, "profile: plugin %s (ABI %u.%u) does not implement the profile call (ABI 1.1)",
                bm->desc->name, (unsigned)bm->desc->abi_major, (unsigned)bm->desc->abi_minor);
        return KH_EXIT_UNSUPPORTED;
    }
    kh_devices *devs = kh_host_devices(h);
    kh_device *dev = kh_host_device(h, p.device);
    if (!dev) return KH_EXIT_DEVICE;
    if (kh_device_activate(devs, dev, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "device %s: %s", dev->id, err);
        return KH_EXIT_DEVICE;
    }

    const kh_task_info *info = t->info();
    int64_t batch = p.batch > 0 ? p.batch : info->batch_size;
    int code = KH_EXIT_OK;
    kh_tdata *data = NULL;
    kh_bsession *sess = NULL;
    kh_bmodel *model = NULL;
    void *x = NULL, *xb = NULL;
    int32_t *y = NULL;
    int64_t *idx = NULL;
    kh_profile_row *rows = NULL;
    kh_profile_grad *grads = NULL;
    kh_layer_flops *lf = NULL;
    kh_model_shapes sh = {0};
    kh_caps caps;
    memset(&caps, 0, sizeof caps);
    caps.struct_size = sizeof caps;
    kh_spec_buf sb;
    memset(&sb, 0, sizeof sb);
    kh_model_spec spec = sb.spec;
    kh_load_opts lo = {.struct_size = sizeof lo, .data_dir = kh_host_data_dir(h), .limit_train = batch,
                       .limit_val = 1, .seed = h->reg.seed};
    err[0] = 0;
    char why[256];
    if (b->get_caps(dev->kind, &caps) != KH_OK) {
        kh_logf(KH_LOG_ERROR, "profile: %s get_caps failed", bm->desc->name);
        code = KH_EXIT_MODULE;
    } else if (t->load(api, &lo, &data, err, sizeof err) != KH_OK) {
        data = NULL;
        kh_logf(KH_LOG_ERROR, "profile: %s", err[0] ? err : "task load failed");
        code = KH_EXIT_DATA;
    } else if ((err[0] = 0, kh_task_model(tm, data, &sb, err, sizeof err)) != KH_OK ||
               (spec = sb.spec, kh_spec_infer(&spec, &sh, err, sizeof err)) != KH_OK) {
        kh_logf(KH_LOG_ERROR, "profile: task model spec: %s", err[0] ? err : "model() failed");
        code = KH_EXIT_DATA;
    } else if (kh_caps_check(&caps, &spec, why, sizeof why) != 0) {
        kh_logf(KH_LOG_ERROR, "profile: %s x %s on %s: unsupported: %s", bm->desc->name, tm->desc->name, dev->id, why);
        code = KH_EXIT_UNSUPPORTED;
    }
    if (code != KH_EXIT_OK) goto done;
    int64_t n_train = t->count(data, KH_SPLIT_TRAIN);
    if (n_train < batch) batch = n_train;
    if (batch <= 0) {
        kh_logf(KH_LOG_ERROR, "profile: %s: the training split is empty", tm->desc->name);
        code = KH_EXIT_DATA;
        goto done;
    }

    /* one real batch in the backend's layout, as the training loop would hand it over */
    int64_t per = 1;
    for (int i = 0; i < spec.input_rank; i++) per *= spec.input_shape[i];
    int32_t onehot = spec.input_onehot > 0 && !(caps.flags & KH_CAP_ONEHOT_INPUT) ? spec.input_onehot : 0;
    x = api->alloc((size_t)(batch * per) * 4);
    xb = api->alloc((size_t)(batch * per * (onehot ? onehot : 1)) * 4);
    y = api->alloc((size_t)batch * sizeof *y);
    idx = malloc((size_t)batch * sizeof *idx);
    int cap_rows = sh.n_layers + 128;
    rows = calloc((size_t)cap_rows, sizeof *rows);
    grads = kh_prof_grads_new(cap_rows);
    if (!x || !xb || !y || !idx || !rows || !grads) {
        kh_logf(KH_LOG_ERROR, "profile: out of host memory");
        code = KH_EXIT_TRAIN;
        goto done;
    }
    for (int64_t i = 0; i < batch; i++) idx[i] = i;
    kh_tensor tx = {.dtype = spec.input_dtype, .rank = spec.input_rank + 1, .data = x,
                    .layout = spec.input_dtype == KH_I32 ? KH_LAYOUT_NT
                              : spec.input_rank == 3     ? KH_LAYOUT_NHWC
                              : spec.input_rank == 2     ? KH_LAYOUT_NTC
                                                         : KH_LAYOUT_NC};
    tx.dims[0] = batch;
    for (int i = 0; i < spec.input_rank; i++) tx.dims[i + 1] = spec.input_shape[i];
    kh_tensor ty = {.dtype = KH_I32, .layout = KH_LAYOUT_NC, .rank = 1, .dims = {batch}, .data = y};
    kh_tensor txb;
    if (t->get_batch(data, KH_SPLIT_TRAIN, idx, (int32_t)batch, &tx, &ty) != KH_OK ||
        kh_layout_convert(&txb, &tx, caps.image_layout == KH_LAYOUT_NCHW, onehot, xb) != 0) {
        kh_logf(KH_LOG_ERROR, "profile: batch: %s", t->last_error(data));
        code = KH_EXIT_DATA;
        goto done;
    }
    err[0] = 0;
    if (b->open(api, dev, &sess, err, sizeof err) != KH_OK) {
        sess = NULL;
        kh_logf(KH_LOG_ERROR, "profile: open session: %s", err);
        code = KH_EXIT_DEVICE;
        goto done;
    }
    kh_compile_opts co = {.struct_size = sizeof co, .max_batch = (int32_t)batch, .seed = h->reg.seed};
    err[0] = 0;
    if (kh_backend_compile(bm, sess, &spec, &co, &model, err, sizeof err) != KH_OK) {
        model = NULL;
        kh_logf(KH_LOG_ERROR, "profile: compile: %s", err[0] ? err : b->last_error(sess));
        code = KH_EXIT_TRAIN;
        goto done;
    }
    if (kh_cell_init_weights(b, sess, model, &spec, h->reg.seed, err, sizeof err) != 0) {
        kh_logf(KH_LOG_ERROR, "profile: %s", err);
        code = KH_EXIT_TRAIN;
        goto done;
    }
    kh_profile pr = {.struct_size = sizeof pr, .cap_rows = cap_rows, .rows = rows, .grads = grads,
                     .grad_size = sizeof *grads};
    kh_status st = b->profile(model, &txb, &ty, (int32_t)p.warmup, (int32_t)p.steps, &pr);
    if (st != KH_OK) {
        kh_logf(st == KH_ERR_UNSUPPORTED ? KH_LOG_WARN : KH_LOG_ERROR, "profile: %s on %s: %s", bm->desc->name,
                dev->id, b->last_error(sess));
        code = st == KH_ERR_UNSUPPORTED ? KH_EXIT_UNSUPPORTED : KH_EXIT_TRAIN;
        goto done;
    }
    /* the members the host set are its own again whatever the backend wrote over them */
    pr.cap_rows = cap_rows, pr.rows = rows, pr.grads = grads, pr.grad_size = sizeof *grads;
    if (kh_prof_check(&pr, cap_rows, sh.n_layers, (int32_t)p.steps, why, sizeof why) != 0) {
        kh_logf(KH_LOG_ERROR, "profile: backend %s broke the profile contract (backend.h): %s", bm->desc->name, why);
        code = KH_EXIT_TRAIN;
        goto done;
    }
    /* FLOPs per layer for the GFLOP/s figures: a spec the kit cannot count prints the times alone */
    lf = calloc((size_t)sh.n_layers + 1, sizeof *lf);
    kh_model_flops mf;
    err[0] = 0;
    if (lf && kh_spec_flops(&spec, &sh, &mf, lf, err, sizeof err) != KH_OK) {
        kh_logf(KH_LOG_WARN, "profile: no FLOP count for %s: %s", tm->desc->name, err);
        free(lf);
        lf = NULL;
    }
    kh_prof_flops pf = {.layer = lf, .n_layers = sh.n_layers, .spec = &spec, .batch = batch, .dev = dev};
    kh_prof_print(&pr, bm->desc->name, tm->desc->name, dev->id, batch, p.warmup, &pf);
done:
    if (model) b->model_free(model);
    if (sess) b->close(sess);
    if (data) t->unload(data);
    kh_model_shapes_free(&sh);
    kh_spec_buf_free(&sb);
    api->free(x);
    api->free(xb);
    api->free(y);
    free(idx);
    free(rows);
    free(grads);
    free(lf);
    kh_device_release(devs, dev);
    return code;
}
