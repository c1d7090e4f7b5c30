#!/bin/sh
# tests/tensorflow_gpu/verify_gpu.sh KHOST_BIN [PLUGIN] — `khost verify --plugin PLUGIN --device cuda:0 --task all`
# as a ctest (label gpu; PLUGIN tensorflow, or theano from tests/theano_cuda): every op and the six tasks' models
# against the float64 reference kit on the GPU.
# Exit 77 (ctest: skipped) with the reason where khost lists no cuda:0 device; otherwise verify's own status.
khost=${1:-$KHOST_BIN}
plugin=${2:-tensorflow}
if [ ! -x "$khost" ]; then
    echo "SKIP: no khost binary ($khost)"
    exit 77
fi
devices=$("$khost" --list-devices 2>&1)
if ! printf '%s\n' "$devices" | grep -q 'cuda:0'; then
    echo "SKIP: no CUDA device (khost --list-devices):"
    printf '%s\n' "$devices" | sed 's/^/  /'
    exit 77
fi
exec "$khost" verify --plugin "$plugin" --device cuda:0 --task all
