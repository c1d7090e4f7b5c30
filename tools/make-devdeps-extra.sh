#!/usr/bin/env bash
# tools/make-devdeps-extra.sh — prepare, on this (networked) machine, what tools/gpu-check.sh needs on the lent
# GPU machine beyond ../shared/device/make-devdeps.sh (inih, libjpeg-turbo, zlib, libpng):
#   1. cJSON (libcjson-dev, libcjson1), libmd (libmd-dev, libmd0: SHA-256 of theano's code cache) and pkg-config
#      itself (pkgconf-bin, libpkgconf3: the GPU machine may have no pkg-config) unpacked into the same prefix
#      (default .devdeps, ignored by .gitignore);
#   2. the data sets of the six tasks, still compressed, with their checksums, copied from the mirror
#      (../shared/datasets, or $KHOST_MIRROR) into .cache/gpu-data (ignored) — gpu-check.sh installs them there
#      with tools/fetch-datasets --mirror.
# Then name both folders in the device call's `carry`:  carry: [".devdeps", ".cache/gpu-data"]  (~52 MiB).
#
#   tools/make-devdeps-extra.sh [--no-data] [DIR]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
data=1
dir=.devdeps
for a in "$@"; do
    case "$a" in
        --no-data) data=0 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "make-devdeps-extra: unknown option $a" >&2; exit 2 ;;
        *) dir=$a ;;
    esac
done
if [[ ! -d $dir/usr ]]; then
    echo "make-devdeps-extra: $dir/usr missing: run ../shared/device/make-devdeps.sh $dir first" >&2
    exit 2
fi
pkgs="libcjson-dev libcjson1 libmd-dev libmd0 pkgconf-bin libpkgconf3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download $pkgs >/dev/null 2>&1) ||
    { apt-get update >/dev/null && (cd "$tmp" && apt-get download $pkgs >/dev/null); }
for f in "$tmp"/*.deb; do
    dpkg -x "$f" "$dir"
    echo "  unpacked $(basename "$f")"
done
rm -rf "$dir/usr/share/doc" "$dir/usr/share/man"
# pkgconf-bin installs /usr/bin/pkgconf only; gpu-check.sh calls it with LD_LIBRARY_PATH for libpkgconf3
ls "$dir"/usr/bin/pkgconf "$dir"/usr/include/cjson/cJSON.h "$dir"/usr/include/sha2.h >/dev/null
du -sh "$dir"

if ((data)); then
    mirror=${KHOST_MIRROR:-$repo/../shared/datasets}
    dest=.cache/gpu-data
    [[ -f $mirror/SHA256SUMS ]] || { echo "make-devdeps-extra: no mirror at $mirror (KHOST_MIRROR=...)" >&2; exit 2; }
    rm -rf "$dest"
    mkdir -p "$dest/mnist"
    cp "$mirror"/SHA256SUMS "$mirror"/README.md "$dest"/
    cp "$mirror"/mnist/* "$dest"/mnist/
    cp "$mirror"/cifar-10-jpg.tar.xz "$mirror"/aclImdb-labeled.tar.xz "$mirror"/nietzsche.txt "$dest"/
    du -sh "$dest"
fi
echo "carry: [\"$dir\"$( ((data)) && echo ', ".cache/gpu-data"')]"
