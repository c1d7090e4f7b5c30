/* core/cli/commands.h — the subcommands of the khost binary and the state they share. */
#ifndef KHOST_CORE_COMMANDS_H
#define KHOST_CORE_COMMANDS_H

#include "modules/host.h"

/* Each returns a KH_EXIT_ code; argv[0] is the subcommand name. */
int kh_cmd_run(kh_host *h, int argc, char **argv);
int kh_cmd_matrix(kh_host *h, int argc, char **argv);
int kh_cmd_compare(int argc, char **argv);
int kh_cmd_pack(int argc, char **argv);
int kh_cmd_db(int argc, char **argv);
int kh_cmd_history(int argc, char **argv);
int kh_cmd_peak(int argc, char **argv);
int kh_cmd_describe(kh_host *h, int argc, char **argv);
int kh_cmd_verify(kh_host *h, int argc, char **argv);
int kh_cmd_profile(kh_host *h, int argc, char **argv);
int kh_cmd_list(kh_host *h);
int kh_cmd_list_devices(kh_host *h);
#endif
