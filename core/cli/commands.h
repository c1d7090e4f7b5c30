/* core/cli/commands.h — the subcommands of the khost binary and the state they share. */
#ifndef KHOST_CORE_COMMANDS_H
#define KHOST_CORE_COMMANDS_H

#include "devices/devices.h"
#include "modules/loader.h"
#include "modules/registry.h"

typedef struct kh_host {
    char *exe_path;     /* absolute path of this binary (matrix re-executes it) */
    char *conf_path;    /* the registry in use (children get it through KHOST_CONF) */
    kh_registry reg;
    kh_modules mods;
    kh_devices devs;
    int have_devices;
} kh_host;

/* Load the registry and discover modules; devices on demand (kh_host_devices). Returns a KH_EXIT_ code. */
int kh_host_open(kh_host *h, const char *argv0);
kh_devices *kh_host_devices(kh_host *h);
void kh_host_close(kh_host *h);
/* The data directory: $KHOST_DATA, else the registry's data_dir. */
const char *kh_host_data_dir(const kh_host *h);

/* Each returns a KH_EXIT_ code; argv[0] is the subcommand name. */
int kh_cmd_run(kh_host *h, int argc, char **argv);
int kh_cmd_matrix(kh_host *h, int argc, char **argv);
int kh_cmd_report(int argc, char **argv);
int kh_cmd_compare(int argc, char **argv);
int kh_cmd_describe(kh_host *h, int argc, char **argv);
int kh_cmd_verify(kh_host *h, int argc, char **argv);
int kh_cmd_profile(kh_host *h, int argc, char **argv);
int kh_cmd_list(kh_host *h);
int kh_cmd_list_devices(kh_host *h);
#endif
