#!/usr/bin/env bash
# tests/sdk/test_sdk.sh BUILD_DIR SOURCE_DIR — the SDK as a new user meets it, with exactly the commands of
# docs/WRITING_MODULES.md: install khost into a temporary prefix; build the installed examples out of tree
# (a task that reads gzip'd IDX files with the kit's reader, a small CPU backend, a graph backend over the kit's
# graph runtime, the blobs task) with the
# pkg-config one-liner and with the CMake package; install them with the package's helper; run them through
# the installed khost with its installed defaults (data from $XDG_DATA_HOME/khost, results in ./results).
set -uo pipefail
build=$1 src=$2
. "$src/tests/sdk/sdk_lib.sh"
sdk_begin test_sdk
prefix=$tmp/prefix
sdk_install "$build" "$prefix" || { bad "cmake --install"; finish; }
lib=$(cd "$prefix" && ls -d lib* | head -1)
test -x "$prefix/bin/khost" && test -f "$prefix/include/khost/khost.h" && ok || bad "no installed khost or headers"
ex=$prefix/share/khost/examples
[ -f "$ex/sdk_idx_task/sdk_idx.c" ] && [ -f "$ex/sdk_backend/sdk_refcpu.c" ] && [ -f "$ex/sdk_task/sdk_blobs.c" ] &&
    [ -f "$ex/sdk_graph_backend/sdk_graph.c" ] &&
    ok || bad "examples are not installed under share/khost/examples"
grep -Eq '^(data_dir|results_dir) *=' "$prefix/$lib/khost/khost.ini" && bad "the installed registry sets data_dir/results_dir" || ok

# 1. pkg-config, the documented one-liner, for every example (the IDX task needs zlib: Libs, not Libs.private)
export PKG_CONFIG_PATH=$prefix/$lib/pkgconfig
for m in sdk_idx_task/sdk_idx sdk_backend/sdk_refcpu sdk_graph_backend/sdk_graph sdk_task/sdk_blobs; do
    name=$(basename "$m")
    if cc -std=c11 -shared $(pkg-config --cflags khost) -o "$tmp/$name.so" "$ex/$m.c" $(pkg-config --libs khost) \
        -Wl,--no-undefined 2>"$tmp/cc.err"; then ok; else bad "pkg-config build of $name: $(head -5 "$tmp/cc.err")"; continue; fi
    exports=$(nm -D --defined-only "$tmp/$name.so" | awk '$2=="T"{print $3}')
    [ "$exports" = "khost_module_entry" ] && ok || bad "$name exports: $exports"
done
taskdir=$(pkg-config --variable=taskdir khost) plugindir=$(pkg-config --variable=plugindir khost)
[ -d "$taskdir" ] && [ -d "$plugindir" ] && ok || bad "pkg-config taskdir/plugindir do not exist: $taskdir $plugindir"

# 2. the CMake package: build and install each example with khost_add_module / khost_install_module
for d in sdk_idx_task sdk_backend sdk_graph_backend sdk_task; do
    if cmake -S "$ex/$d" -B "$tmp/b-$d" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cmake.log" 2>&1 &&
       cmake --build "$tmp/b-$d" >>"$tmp/cmake.log" 2>&1 && cmake --install "$tmp/b-$d" >>"$tmp/cmake.log" 2>&1; then
        ok
    else
        bad "CMake build/install of $d: $(tail -5 "$tmp/cmake.log")"
    fi
done
[ -f "$taskdir/sdk_idx.so" ] && [ -f "$taskdir/sdk_blobs.so" ] && [ -f "$plugindir/sdk_refcpu.so" ] &&
    [ -f "$plugindir/sdk_graph.so" ] && ok ||
    bad "khost_install_module did not put the modules into $taskdir and $plugindir"
# a kind other than TASK/BACKEND is refused at configure time
mkdir -p "$tmp/badkind" && cp "$ex/sdk_task/sdk_blobs.c" "$tmp/badkind/" &&
printf 'cmake_minimum_required(VERSION 3.20)\nproject(b C)\nfind_package(khost REQUIRED)\nkhost_add_module(b PLUGIN SOURCES sdk_blobs.c)\n' \
    >"$tmp/badkind/CMakeLists.txt"
cmake -S "$tmp/badkind" -B "$tmp/b-badkind" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/bk.log" 2>&1 &&
    bad "khost_add_module accepted the kind PLUGIN" || { grep -q "TASK or BACKEND" "$tmp/bk.log" && ok || bad "no reason: $(tail -3 "$tmp/bk.log")"; }

# 3. data where the installed khost looks by default: $XDG_DATA_HOME/khost/mnist, IDX files, gzip'd.
export XDG_DATA_HOME=$tmp/xdg
sdk_idx_data "$XDG_DATA_HOME/khost/mnist"

# 4. run through the installed khost, from a working directory of its own, no KHOST_CONF / KHOST_DATA
unset KHOST_CONF KHOST_DATA
export KHOST_LIBCUDA=/nonexistent
work=$tmp/work && mkdir -p "$work" && cd "$work"
"$prefix/bin/khost" --list >"$tmp/list.txt" 2>&1
grep -q sdk_idx "$tmp/list.txt" && grep -q sdk_refcpu "$tmp/list.txt" && ok || bad "modules not discovered: $(cat "$tmp/list.txt")"
"$prefix/bin/khost" describe --task sdk_idx >"$tmp/describe.txt" 2>&1
grep -q "dense(relu)" "$tmp/describe.txt" && grep -q "dense(softmax)" "$tmp/describe.txt" && grep -q "300 train / 100 validation" "$tmp/describe.txt" &&
    ok || bad "describe: $(cat "$tmp/describe.txt")"
"$prefix/bin/khost" run --plugin sdk_refcpu --task sdk_idx --device cpu --epochs 2 --quiet --json >"$tmp/run.json" 2>"$tmp/run.err"
tail -1 "$tmp/run.json" | grep -q '"status":"ok"' && ok || bad "run sdk_refcpu x sdk_idx: $(cat "$tmp/run.json" "$tmp/run.err")"
acc=$(tail -1 "$tmp/run.json" | sed -n 's/.*"metric_value":\([0-9.e-]*\).*/\1/p')
awk -v a="${acc:-0}" 'BEGIN{exit !(a > 0.9)}' && ok || bad "sdk_idx did not learn its 3 separable classes: val_acc ${acc:-none}"
tail -1 "$tmp/run.json" | grep -q '"gflops":[0-9]' && ok || bad "no GFLOP/s in the record"
[ -f "$work/results/sdk_idx/sdk_refcpu__cpu.json" ] && ok || bad "results not in ./results of the working directory"
[ ! -e "$prefix/$lib/results" ] && [ ! -e "$prefix/$lib/data" ] && ok || bad "the installed khost wrote into its prefix"
"$prefix/bin/khost" run --plugin cntk --task sdk_blobs --device cpu --quiet --json >"$tmp/run2.json" 2>&1
tail -1 "$tmp/run2.json" | grep -q '"status":"ok"' && ok || bad "run cntk x sdk_blobs: $(cat "$tmp/run2.json")"
"$prefix/bin/khost" verify --plugin sdk_refcpu --task sdk_idx >"$tmp/verify.txt" 2>&1 && ok ||
    bad "verify sdk_refcpu: $(tail -5 "$tmp/verify.txt")"
# the graph backend: the kit's graph runtime with the example's executor, run and verified like any backend
"$prefix/bin/khost" verify --plugin sdk_graph --task sdk_idx >"$tmp/verify2.txt" 2>&1 &&
    grep -q "summary: [1-9][0-9]* passed, 0 failed" "$tmp/verify2.txt" && ok ||
    bad "verify sdk_graph: $(tail -5 "$tmp/verify2.txt")"
"$prefix/bin/khost" run --plugin sdk_graph --task sdk_idx --device cpu --epochs 2 --quiet --json >"$tmp/run3.json" 2>&1
acc=$(tail -1 "$tmp/run3.json" | sed -n 's/.*"metric_value":\([0-9.e-]*\).*/\1/p')
awk -v a="${acc:-0}" 'BEGIN{exit !(a > 0.9)}' && ok || bad "sdk_graph x sdk_idx did not learn: $(tail -1 "$tmp/run3.json")"

# 5. a module the host refuses (built for ABI 2), then run by name: the refusal's reason, not "no module named"
sed 's/KH_MODULE_DESC_HEAD,/KH_MODULE_DESC_HEAD, .abi_major = 2,/; s/"sdk_blobs"/"old_task"/' "$ex/sdk_task/sdk_blobs.c" >"$tmp/old_task.c"
cc -std=c11 -shared $(pkg-config --cflags khost) -o "$taskdir/old_task.so" "$tmp/old_task.c" $(pkg-config --libs khost) -Wl,--no-undefined
"$prefix/bin/khost" run --plugin cntk --task old_task --device cpu --quiet >"$tmp/old.txt" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -q "major version differs" "$tmp/old.txt" && ! grep -q "no task module named" "$tmp/old.txt" && ok ||
    bad "refused module run by name (exit $rc): $(cat "$tmp/old.txt")"
finish
