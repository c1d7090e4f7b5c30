#!/bin/sh
# tests/cntk_gpu/verify_gpu.sh KHOST_BIN — `khost verify --plugin cntk --device cuda:0` as a ctest (label gpu).
# Exit 77 (ctest: skipped) with the reason where khost lists no cuda:0 device or the verify command does not
# exist yet; otherwise verify's own exit status.
khost=${1:-$KHOST_BIN}
if [ ! -x "$khost" ]; then
    echo "SKIP: no khost binary ($khost)"
    exit 77
fi
# the prerequisites, before the device question (the rehearsal runs this part without a GPU): the module
# loads and lists its cuda device kind
plugin_list=$("$khost" --list 2>&1)
if ! printf '%s\n' "$plugin_list" | sed -n "/^  cntk /,/^  [a-z]/p" | grep -qE '^ +cuda '; then
    echo "FAIL: khost --list shows no cntk module with a cuda device kind:"
    printf '%s\n' "$plugin_list" | sed 's/^/  /'
    exit 1
fi
echo "prerequisites ok: khost and the cntk module (its cuda kind listed)"
devices=$("$khost" --list-devices 2>&1)
if ! printf '%s\n' "$devices" | grep -q 'cuda:0'; then
    echo "SKIP: no CUDA device (khost --list-devices):"
    printf '%s\n' "$devices" | sed 's/^/  /'
    exit 77
fi
if ! "$khost" verify --help >/dev/null 2>&1 && ! "$khost" --help 2>&1 | grep -q verify; then
    echo "SKIP: this khost has no verify command"
    exit 77
fi
exec "$khost" verify --plugin cntk --device cuda:0
