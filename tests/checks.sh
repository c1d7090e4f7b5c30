# tests/checks.sh — sourced by the shell tests: check DESCRIPTION COMMAND... counts a pass or prints the failure;
# has TEXT NEEDLE is a fixed-string search; finish prints the tally as NAME: P passed, F failed and sets the exit.
pass=0 fail=0
check() { local what=$1; shift; if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $what" >&2; fi; }
has() { grep -qF -- "$2" <<<"$1"; }
finish() { echo "$1: $pass passed, $fail failed"; [ $fail -eq 0 ]; }
