# tests/sdk/sdk_lib.sh — what the SDK tests share (sourced): their counters and temporary folder, the installation
# they build against, and an IDX data set for the IDX example task.

# sdk_begin NAME — pass/fail counters (ok, bad, finish prints "NAME: N passed, N failed" and exits), and $tmp, an
# absolute temporary folder removed on exit
sdk_begin() {
    sdk_name=$1 pass=0 fail=0
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/khost-$1-XXXXXX") && tmp=$(cd "$tmp" && pwd) || exit 1
    trap 'rm -rf "$tmp"' EXIT
}
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
finish() { echo "$sdk_name: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

# sdk_install BUILD_DIR PREFIX — `cmake --install` of the build into PREFIX, as a user installs khost
sdk_install() {
    cmake --install "$1" --prefix "$2" >/dev/null
}

# sdk_idx_data DIR — gzip'd IDX files where an installed khost looks for mnist: 300 training / 100 validation 8x8
# images; class k lights row k (3 classes), plus deterministic noise
sdk_idx_data() {
    mkdir -p "$1" || return 1
    _sdk_idx "$1/train-images-idx3-ubyte" 300 images && _sdk_idx "$1/train-labels-idx1-ubyte" 300 labels &&
        _sdk_idx "$1/t10k-images-idx3-ubyte" 100 images && _sdk_idx "$1/t10k-labels-idx1-ubyte" 100 labels
}

_sdk_idx() { # file n kind(images|labels)
    LC_ALL=C awk -v n="$2" -v kind="$3" 'function be(v){printf "%c%c%c%c", int(v/16777216)%256, int(v/65536)%256, int(v/256)%256, v%256}
    BEGIN { if (kind == "images") { printf "%c%c%c%c", 0, 0, 8, 3; be(n); be(8); be(8) } else { printf "%c%c%c%c", 0, 0, 8, 1; be(n) }
            s = 12345
            for (i = 0; i < n; i++) { c = i % 3
              if (kind == "labels") { printf "%c", c; continue }
              for (p = 0; p < 64; p++) { s = (s * 1103515245 + 12345) % 2147483648; v = int(s / 65536) % 64
                                         if (int(p / 8) == c) v += 180; printf "%c", v } } }' | gzip -9 >"$1.gz"
}
