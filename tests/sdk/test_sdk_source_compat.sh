#!/usr/bin/env bash
# tests/sdk/test_sdk_source_compat.sh BUILD_DIR SOURCE_DIR — sources written against the SDK at ABI 1.2 build
# unchanged against today's *installed* SDK and train: the frozen examples of tests/sdk/frozen-abi-1.2 (a backend
# and two tasks that include <khost/kit.h>, <khost/ref.h> and <khost/data_image.h>), each compiled with the
# documented pkg-config line and -Wall -Werror (docs/WRITING_MODULES.md), installed where pkg-config says, and run
# through the installed khost for one epoch. Then the opt-in: with -DKHOST_WARN_DEPRECATED each old path warns
# and names where the header went (docs/ABI.md, "Source compatibility").
set -uo pipefail
build=$1 src=$2
frozen=$(cd "$src/tests/sdk/frozen-abi-1.2" && pwd) || exit 1
. "$src/tests/sdk/sdk_lib.sh"
sdk_begin test_sdk_source_compat

prefix=$tmp/prefix
sdk_install "$build" "$prefix" || { bad "cmake --install"; finish; }
lib=$(cd "$prefix" && ls -d lib* | head -1)
export PKG_CONFIG_PATH=$prefix/$lib/pkgconfig
taskdir=$(pkg-config --variable=taskdir khost) plugindir=$(pkg-config --variable=plugindir khost)
[ -d "$taskdir" ] && [ -d "$plugindir" ] && ok || { bad "pkg-config taskdir/plugindir: '$taskdir' '$plugindir'"; finish; }

# the sources are the frozen ones: includes from before the header split, never edited
grep -q '#include <khost/kit.h>' "$frozen/sdk_refcpu.c" && grep -q '#include <khost/ref.h>' "$frozen/sdk_refcpu.c" &&
    grep -q '#include <khost/data_image.h>' "$frozen/sdk_idx.c" && ok || bad "the frozen sources are not the ABI 1.2 ones"

build_one() { # source, output .so, extra flags...
    local in=$1 out=$2; shift 2
    cc -std=c11 -Wall -Werror "$@" -shared $(pkg-config --cflags khost) -o "$out" "$in" $(pkg-config --libs khost) \
        -Wl,--no-undefined 2>"$tmp/cc.err"
}
build_frozen() { # name, destination folder
    build_one "$frozen/$1.c" "$2/$1.so" && ok || bad "$1.c (ABI 1.2, unchanged) does not build: $(head -5 "$tmp/cc.err")"
}
build_frozen sdk_refcpu "$plugindir"
build_frozen sdk_idx "$taskdir"
build_frozen sdk_blobs "$taskdir"

# data where the installed khost looks by default, and runs from a working directory of its own
export XDG_DATA_HOME=$tmp/xdg KHOST_LIBCUDA=/nonexistent
unset KHOST_CONF KHOST_DATA
sdk_idx_data "$XDG_DATA_HOME/khost/mnist" || bad "IDX data"
mkdir -p "$tmp/work" && cd "$tmp/work" || finish
"$prefix/bin/khost" --list >"$tmp/list.txt" 2>&1
for n in sdk_refcpu sdk_idx sdk_blobs; do
    grep -Eq "^  $n +" "$tmp/list.txt" && ok || bad "$n is not listed: $(cat "$tmp/list.txt")"
done
train() { # plugin task: one epoch, ok, and it learned the separable classes
    "$prefix/bin/khost" run --plugin "$1" --task "$2" --device cpu --epochs 1 --quiet --json >"$tmp/run.json" 2>"$tmp/run.err"
    local rc=$? acc
    [ $rc -eq 0 ] && tail -1 "$tmp/run.json" | grep -q '"status":"ok"' && ok ||
        { bad "$1 x $2: exit $rc: $(tail -1 "$tmp/run.json") $(tail -3 "$tmp/run.err")"; return; }
    acc=$(tail -1 "$tmp/run.json" | sed -n 's/.*"metric_value":\([0-9.e-]*\).*/\1/p')
    awk -v a="${acc:-0}" 'BEGIN{exit !(a > 0.9)}' && ok || bad "$1 x $2 did not learn in one epoch: val_acc ${acc:-none}"
}
train sdk_refcpu sdk_idx    # the 1.2 backend on the 1.2 IDX task
train sdk_refcpu sdk_blobs
train cntk sdk_blobs        # a bundled backend on the 1.2 task

# the opt-in: every old path warns, naming its new place (and -Werror then refuses, which is the author's choice)
build_one "$frozen/sdk_idx.c" "$tmp/warn.so" -DKHOST_WARN_DEPRECATED && bad "KHOST_WARN_DEPRECATED: no warning" ||
    { grep -q 'khost/data_image.h> is deprecated: include <khost/kit/data_image.h>' "$tmp/cc.err" && ok ||
        bad "KHOST_WARN_DEPRECATED does not say where data_image.h went: $(head -5 "$tmp/cc.err")"; }
build_one "$frozen/sdk_refcpu.c" "$tmp/warn.so" -DKHOST_WARN_DEPRECATED
grep -q 'khost/kit.h> is deprecated' "$tmp/cc.err" && grep -q 'khost/ref.h> is deprecated: include <khost/kit/ref.h>' "$tmp/cc.err" &&
    ok || bad "KHOST_WARN_DEPRECATED on kit.h/ref.h: $(head -5 "$tmp/cc.err")"
# renamed functions: the old names compile silently, and warn with the opt-in
cat >"$tmp/old_names.c" <<'C'
#include <khost/ref.h>
#include <khost/graph.h>
int old_names(void);
int old_names(void) {
    kh_ref_conv2d_dims d;
    struct kh_ref_conv2d_dims *pd = &d; /* the 1.2 struct tag too */
    kh_optimizer_spec o = {0};
    o.kind = KH_OPT_SGD;
    return (int)kh_ref_conv2d_geometry(pd, 1, 8, 8, 1, 3, 3, 4, 1, 1, 0) + kh_graph_optimizer_slots(o.kind) +
           (int)kh_graph_step_lr(&o, 0) + (int)kh_graph_resolve_optimizer(&o).kind;
}
C
build_one "$tmp/old_names.c" "$tmp/old.so" && ok || bad "renamed functions: $(head -5 "$tmp/cc.err")"
build_one "$tmp/old_names.c" "$tmp/old.so" -DKHOST_WARN_DEPRECATED
for n in kh_conv2d_dims kh_conv2d_geometry kh_optimizer_slots kh_optimizer_step_lr kh_optimizer_resolve; do
    grep -q "use $n instead" "$tmp/cc.err" && ok || bad "no deprecation naming $n: $(head -3 "$tmp/cc.err")"
done
finish
