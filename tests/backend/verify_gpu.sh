#!/bin/sh
# tests/backend/verify_gpu.sh KHOST_BIN [PLUGIN] — `khost verify --plugin PLUGIN --device cuda:0 --task all`
# as a ctest (test_backend_verify_<plugin>_cuda, label gpu; PLUGIN defaults to tensorflow): every layer and the
# six tasks' models against the float64 reference kit on the GPU, through the host binary.
# Fails when the module is not listed with its cuda kind; then exits 77 (ctest: skipped) with the reason where
# khost lists no cuda:0 device; otherwise verify's own status.
khost=${1:-$KHOST_BIN}
plugin=${2:-tensorflow}
if [ ! -x "$khost" ]; then
    echo "SKIP: no khost binary ($khost)"
    exit 77
fi
# the prerequisites, before the device question (the rehearsal runs this part without a GPU): the module
# loads and lists its cuda device kind
plugin_list=$("$khost" --list 2>&1)
if ! printf '%s\n' "$plugin_list" | sed -n "/^  $plugin /,/^  [a-z]/p" | grep -qE '^ +cuda '; then
    echo "FAIL: khost --list shows no $plugin module with a cuda device kind:"
    printf '%s\n' "$plugin_list" | sed 's/^/  /'
    exit 1
fi
echo "prerequisites ok: khost and the $plugin module (its cuda kind listed)"
devices=$("$khost" --list-devices 2>&1)
if ! printf '%s\n' "$devices" | grep -q 'cuda:0'; then
    echo "SKIP: no CUDA device (khost --list-devices):"
    printf '%s\n' "$devices" | sed 's/^/  /'
    exit 77
fi
exec "$khost" verify --plugin "$plugin" --device cuda:0 --task all
