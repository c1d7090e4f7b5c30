/* core/main.c — the khost command line: dispatch to subcommands (see --help). Only main() exits. */
#include <stdio.h>
int main(void) { puts("khost: under construction"); return 0; }
