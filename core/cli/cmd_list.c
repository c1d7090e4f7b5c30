/* core/cli/cmd_list.c — `khost --list`, `khost --list-devices`, `khost describe --task T`. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "base/args.h"
#include "modules/caps.h"
#include "cli/commands.h"
#include "modules/layer_abi.h"
#include "base/exitcodes.h"
#include "base/log.h"
#include "modules/host_api.h"
#include "khost/kit/status.h"
#include "khost/kit/spec.h"

int kh_cmd_list(kh_host *h) {
    printf("registry: %s\n", h->conf_path);
    kh_modules_load_kind(&h->mods, -1, kh_host_api_get());
    for (int kind = KH_MODULE_BACKEND; kind <= KH_MODULE_TASK; kind++) {
        printf("%s:\n", kind == KH_MODULE_BACKEND ? "backends" : "tasks");
        int any = 0;
        for (int i = 0; i < h->mods.n; i++) {
            kh_module *m = &h->mods.v[i];
            if (m->kind != kind) continue;
            any = 1;
            printf("  %-26s %-8s ABI %u.%u  %s%s\n      %s\n", m->desc->name, m->desc->version ? m->desc->version : "?",
                   m->desc->abi_major, m->desc->abi_minor, m->enabled ? "" : "[disabled] ",
                   m->desc->description ? m->desc->description : "", m->path);
            if (kind == KH_MODULE_BACKEND) {
                for (uint32_t dk = 0; dk < KH_DEVICE_KIND_END; dk++) {
                    kh_caps c;
                    memset(&c, 0, sizeof c);
                    c.struct_size = sizeof c;
                    char buf[512];
                    if (m->backend->get_caps(dk, &c) != KH_OK) continue;
                    if (c.available) kh_caps_describe(&c, buf, sizeof buf);
                    else snprintf(buf, sizeof buf, "unavailable: %s", c.note);
                    printf("      %-5s %s\n", dk == KH_DEVICE_CPU ? "cpu" : "cuda", buf);
                }
            } else {
                const kh_task_info *ti = m->task->info();
                printf("      data set %s, %d epochs, batch %d, metric %s\n", ti->dataset, ti->epochs, ti->batch_size,
                       ti->metric);
            }
        }
        if (!any) printf("  (none)\n");
    }
    if (h->mods.n_errors) {
        printf("load errors:\n");
        for (int i = 0; i < h->mods.n_errors; i++) printf("  %s\n", h->mods.errors[i].message);
    }
    return KH_EXIT_OK;
}

int kh_cmd_list_devices(kh_host *h) {
    kh_devices *d = kh_host_devices(h);
    char drv[64];
    kh_devices_driver_string(d, drv, sizeof drv);
    for (int i = 0; i < d->n; i++) {
        const kh_device *v = &d->v[i];
        if (v->kind == KH_DEVICE_CPU) {
            printf("%-8s %s, %d threads\n", v->id, v->name, v->threads);
        } else {
            printf("%-8s %s, compute %d.%d, %.1f GiB, %d SMs, PCI %s, driver %s\n", v->id, v->name, v->cc_major,
                   v->cc_minor, (double)v->total_mem / (1024.0 * 1024 * 1024), v->multiprocessors, v->pci_bus_id, drv);
        }
    }
    if (d->n == 1) printf("(no CUDA device: %s)\n", d->note[0] ? d->note : "none found");
    return KH_EXIT_OK;
}

static void print_line(void *ctx, const char *line) {
    (void)ctx;
    printf("  %s\n", line);
}

int kh_cmd_describe(kh_host *h, int argc, char **argv) {
    kh_args a;
    kh_args_init(&a, "describe", argc, argv);
    const char *opt, *iv, *task = NULL;
    int64_t limit_train = 0, limit_val = 0;
    while ((opt = kh_args_next(&a, &iv))) {
        const char *v;
        if (!strcmp(opt, "--task")) {
            if (!(task = kh_args_value(&a, opt, iv))) return KH_EXIT_USAGE;
        } else if (!strcmp(opt, "--limit-train") || !strcmp(opt, "--limit-val")) {
            if (!(v = kh_args_value(&a, opt, iv)) ||
                kh_args_int64(opt, v, 1, !strcmp(opt, "--limit-train") ? &limit_train : &limit_val))
                return KH_EXIT_USAGE;
        } else {
            fprintf(stderr, "khost describe: unknown option '%s'\n", opt);
            return KH_EXIT_USAGE;
        }
    }
    if (!task) {
        fprintf(stderr, "khost describe: --task T is required\n");
        return KH_EXIT_USAGE;
    }
    char err[1024];
    kh_module *t = kh_modules_find(&h->mods, KH_MODULE_TASK, task, kh_host_api_get(), err, sizeof err);
    if (!t) {
        kh_logf(KH_LOG_ERROR, "%s", err);
        return KH_EXIT_MODULE;
    }
    const kh_task_info *ti = t->task->info();
    kh_load_opts lo = {.struct_size = sizeof lo, .data_dir = kh_host_data_dir(h), .limit_train = limit_train,
                       .limit_val = limit_val, .seed = h->reg.seed};
    kh_tdata *d = NULL;
    err[0] = 0;
    kh_status st = t->task->load(kh_host_api_get(), &lo, &d, err, sizeof err);
    if (st != KH_OK) {
        kh_logf(KH_LOG_ERROR, "%s: %s", t->desc->name, err[0] ? err : kh_status_name(st));
        return KH_EXIT_DATA;
    }
    printf("task %s (%s): data set %s in %s\n", t->desc->name, t->desc->description ? t->desc->description : "",
           ti->dataset, lo.data_dir);
    printf("  train samples %lld, validation samples %lld; %d epochs, batch %d",
           (long long)t->task->count(d, KH_SPLIT_TRAIN), (long long)t->task->count(d, KH_SPLIT_VAL), ti->epochs,
           ti->batch_size);
    if (ti->train_samples_per_epoch > 0) printf(", %lld samples per epoch", (long long)ti->train_samples_per_epoch);
    printf("\n");
    kh_spec_buf sb;
    kh_model_shapes sh;
    if (kh_task_model(t, d, &sb, err, sizeof err) == KH_OK && kh_spec_infer(&sb.spec, &sh, err, sizeof err) == KH_OK) {
        const kh_model_spec spec = sb.spec;
        printf("  model %s: %lld parameters, loss %s, optimizer %s (lr %g)\n", spec.name ? spec.name : "",
               (long long)sh.total_params, kh_loss_name(spec.loss), kh_optimizer_name(spec.optimizer.kind),
               (double)spec.optimizer.lr);
        for (int i = 0; i < sh.n_layers; i++) {
            const kh_layer_shapes *l = &sh.layers[i];
            const kh_layer_spec *ls = &spec.layers[i];
            char kind[48]; /* activations matter: Dense(relu) and Dense(softmax) are different layers */
            if (ls->kind == KH_LAYER_DENSE || ls->kind == KH_LAYER_CONV2D || ls->kind == KH_LAYER_ACTIVATION)
                snprintf(kind, sizeof kind, "%s(%s)", kh_layer_kind_name(ls->kind), kh_activation_name(ls->activation));
            else
                snprintf(kind, sizeof kind, "%s", kh_layer_kind_name(ls->kind));
            printf("    %-2d %-24s out (", i, kind);
            for (int k = 0; k < l->out_rank; k++) printf("%s%d", k ? ", " : "", l->out_shape[k]);
            printf(")\n");
        }
        kh_model_shapes_free(&sh);
    }
    kh_spec_buf_free(&sb);
    int rc = KH_EXIT_OK;
    if (t->task->describe(d, print_line, NULL) != KH_OK) {
        kh_logf(KH_LOG_ERROR, "%s: describe: %s", t->desc->name, t->task->last_error(d));
        rc = KH_EXIT_DATA;
    }
    t->task->unload(d);
    return rc;
}
