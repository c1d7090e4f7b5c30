#!/usr/bin/env bash
# tests/hostile/test_hostile.sh — hostile modules, signals, odd files and huge numbers: each ends in a clear
# message, a record or a refusal; never a crash, a hang, silence or a write outside the place named.
# The misbehaving modules are compiled here from hostile_task.c / hostile_backend.c against the source
# tree's headers; FIFOs, links and device nodes are made inside this test's own temporary folder.
# usage: test_hostile.sh KHOST_BIN SOURCE_DIR E2E_DIR PART   (PART: modules numbers files signals resume cache compiler locale
#        world)
set -u
bin=$1 src=$2 e2e=$3 part=$4
here=$src/tests/hostile
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
check() { local what=$1; shift; if "$@"; then ok; else bad "$what"; fi; }
has() { grep -qF -- "$2" <<<"$1"; }
json_field() { grep -oP "\"$2\":\s*\"\K[^\"]*" "$1" 2>/dev/null | head -1; }

t=$(mktemp -d "${TMPDIR:-/tmp}/khost-hostile-XXXXXX")
bgpids=()
cleanup() { for p in "${bgpids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$t"; }
trap cleanup EXIT
mkdir -p "$t/plugins" "$t/tasks"
CC=${CC:-cc}
backend() { # compile the hostile backend of one way (a wrapper of the fixture backend)
  "$CC" -std=c11 -shared -fPIC -I"$src/include" -DHOSTILE_INNER="\"$e2e/plugins/fixture.so\"" -DHOSTILE_WAY="\"$1\"" \
    "$here/hostile_backend.c" -o "$t/plugins/hostile_$1.so" -ldl || { echo "cannot compile hostile_$1" >&2; exit 1; }
}
task() { # compile the hostile task of one way
  "$CC" -std=c11 -O1 -shared -fPIC -I"$src/include" -DHOSTILE="\"$1\"" "$here/hostile_task.c" -o "$t/tasks/hostile_$1.so" -lm ||
    { echo "cannot compile hostile_$1" >&2; exit 1; }
}
cat >"$t/khost.ini" <<EOF2
[khost]
plugin_dirs = $e2e/plugins:$t/plugins
task_dirs = $t/tasks
data_dir = $t/data
results_dir = $t/results
default_device = cpu
EOF2
export KHOST_CONF=$t/khost.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
mkdir -p "$t/data"
k() { timeout 60 "$bin" "$@" 2>&1; }
T="--plugin fixture --device cpu --epochs 2 --out $t/r"

case $part in
modules)
  for w in info_null batch0 dotdot dsnull negval nanval exit0 hugeshape predict; do task $w; done
  backend nopredict
  o=$(k --list); rc=$?
  check "--list survives a task whose info() is NULL (rc $rc)" test $rc -lt 128
  check "... and names it: $o" has "$o" "task 'hostile_info_null': info() returned NULL"
  check "... a batch size of 0 is refused at load" has "$o" "info()->batch_size is 0"
  check "... a data set '../../..' is refused" has "$o" "info()->dataset '../../..' is not a plain name"
  check "... a NULL data set is refused" has "$o" "info()->dataset is NULL"
  o=$(k run $T --task hostile_info_null); rc=$?
  check "run of the info-NULL task: exit 3, not a crash ($rc): $o" test $rc -eq 3
  check "... naming the reason" has "$o" "info() returned NULL"
  o=$(k run $T --task hostile_batch0); rc=$?
  check "run with batch size 0 ends at once with exit 3 ($rc)" test $rc -eq 3
  o=$(k run $T --task hostile_negval); rc=$?
  check "a negative validation count is a data error ($rc): $o" test $rc -eq 4
  check "... naming count(validation)" has "$o" "count(validation) returned -5"
  o=$(k run $T --task hostile_nanval); rc=$?
  check "NaN validation loss: exit 1 ($rc)" test $rc -eq 1
  check "... recorded as diverged" test "$(json_field "$t/r/hostile_nanval/fixture__cpu.json" status)" = diverged
  check "... saying so: $o" has "$o" "validation loss became NaN in epoch 1"
  o=$(k run $T --task hostile_exit0); rc=$?
  check "a module's exit(0) is not exit 0 ($rc): $o" test $rc -eq 1
  check "... it leaves a record with status error" test "$(json_field "$t/r/hostile_exit0/fixture__cpu.json" status)" = error
  check "... and a message" has "$o" "a module called exit()"
  o=$(k run $T --task hostile_hugeshape); rc=$?
  check "an over-large input shape is named, not 'oom' ($rc): $o" has "$o" "input shape 1073741824 with batch size 1048576"
  check "... status error, not oom" test "$(json_field "$t/r/hostile_hugeshape/fixture__cpu.json" status)" = error
  o=$(k run --plugin hostile_nopredict --device cpu --epochs 1 --out "$t/r" --task hostile_predict); rc=$?
  check "a backend without predict: the cell still finishes ok ($rc): $o" test $rc -eq 0
  check "... the after-training step is skipped with a warning" has "$o" "needs predict, which backend hostile_nopredict does not provide"
  o=$(k run --plugin fixture --device cpu --epochs 1 --out "$t/r" --task hostile_predict); rc=$?
  check "with predict the after-training step runs ($rc): $o" has "$o" "prediction: made"
  o=$(k run --plugin '' --task hostile_predict); rc=$?
  check "--plugin '' says the name is empty ($rc): $o" has "$o" "not an empty one"
  printf '[plugin hostile_predict]\npath = %s\n[task hostile_predict]\npath = %s\n' "$t/tasks/hostile_predict.so" \
    "$t/tasks/hostile_predict.so" | cat "$t/khost.ini" - >"$t/both.ini"
  o=$(KHOST_CONF=$t/both.ini k run --plugin hostile_predict --task hostile_predict); rc=$?
  check "a module listed as plugin and task: exit 3 with the reason ($rc): $o" has "$o" "is a task module"
  check "... not '(available: none)'" test -z "$(grep -F 'available: none' <<<"$o")"
  o=$(k matrix --plugins fixture --tasks hostile_exit0 --epochs 1 --out "$t/m"); rc=$?
  check "matrix records the exit(0) cell as error ($rc)" test "$(json_field "$t/m/hostile_exit0/fixture__cpu.json" status)" = error
  ;;
numbers)
  task predict
  for a in "--epochs 2147483648" "--epochs 4294967297" "--batch-size 4294967296" "--steps 9223372036854775807"; do
    o=$(k run $T --task hostile_predict $a); rc=$?
    check "run $a is a usage error ($rc): $o" test $rc -eq 2
    check "... naming the range" has "$o" "from 1 to 2147483647"
  done
  o=$(k matrix --plugins fixture --tasks hostile_predict --epochs 4294967297 --out "$t/m"); rc=$?
  check "matrix --epochs 4294967297 is a usage error ($rc): $o" test $rc -eq 2
  o=$(k run $T --task no_such_task --epochs 2147483647 --batch-size 2147483647); rc=$?
  check "the largest int passes the option check (the run then stops at the unknown task: exit 3, $rc)" test $rc -eq 3
  ;;
files)
  task predict
  mkfifo "$t/fifo.ini"
  o=$(KHOST_CONF=$t/fifo.ini timeout 10 "$bin" --list 2>&1); rc=$?
  check "KHOST_CONF naming a FIFO does not block ($rc)" test $rc -ne 124
  check "... and says it is not a regular file: $o" has "$o" "not a regular file"
  long=$t/$(printf 'd%.0s' $(seq 1 250))/$(printf 'e%.0s' $(seq 1 250))/$(printf 'f%.0s' $(seq 1 250))
  mkdir -p "$long" && cp "$e2e/plugins/fixture.so" "$long/"
  line="plugin_dirs = $e2e/plugins:$long:$(printf '/nonexistent/%.0s' $(seq 1 300))"
  check "the registry line under test is over 4096 characters" test ${#line} -gt 4096
  sed "s|^plugin_dirs = .*|$line|" "$t/khost.ini" >"$t/long.ini"
  o=$(KHOST_CONF=$t/long.ini k --list); rc=$?
  check "a registry line of ${#line} characters is read ($rc): $o" test $rc -eq 0
  o=$(k run $T --task hostile_predict --epochs 1); rc=$?
  check "a record to report on ($rc)" test $rc -eq 0
  touch "$t/target.html"
  ln -s "$t/target.html" "$t/link.html"
  o=$(k report "$t/r" --html "$t/link.html"); rc=$?
  check "report --html onto a symlink is refused ($rc): $o" test $rc -eq 8
  check "... the link is still a link" test -L "$t/link.html"
  check "... its target untouched" test ! -s "$t/target.html"
  mkfifo "$t/out.fifo"
  o=$(k report "$t/r" --svg "$t/out.fifo"); rc=$?
  check "report --svg onto a FIFO is refused ($rc): $o" has "$o" "is a FIFO"
  check "... still a FIFO" test -p "$t/out.fifo"
  if mknod "$t/null" c 1 3 2>/dev/null; then
    o=$(k report "$t/r" --html "$t/null"); rc=$?
    check "report --html onto a device node is refused ($rc): $o" has "$o" "is a character device"
    check "... the node is still a device" test -c "$t/null"
  else
    echo "note: mknod refused here: the device-node case is not tested in this run" >&2
  fi
  o=$(k report "$t/r" --html "$t/new.html"); rc=$?
  check "report --html to a new file works ($rc)" test $rc -eq 0 -a -s "$t/new.html"
  # a record that names its task by a path to a shared object: report loads modules by registry name only
  printf '#include <stdio.h>\n__attribute__((constructor)) static void hit(void) { FILE *f = fopen("%s/LOADED", "w"); if (f) fclose(f); }\n' "$t" >"$t/evil.c"
  "$CC" -shared -fPIC "$t/evil.c" -o "$t/evil.so" || { echo "cannot compile evil.so" >&2; exit 1; }
  rec=$(ls "$t"/r/hostile_predict/*.json | grep -v stats | head -1)
  mkdir -p "$t/rev/evil"
  sed "s|\"task\":[[:space:]]*\"hostile_predict\"|\"task\": \"$t/evil.so\"|" "$rec" >"$t/rev/evil/$(basename "$rec")"
  check "the planted record names the shared object" grep -qF "$t/evil.so" "$t/rev/evil/$(basename "$rec")"
  o=$(k report "$t/rev" --published --html "$t/rev.html"); rc=$?
  check "report of a record naming a .so by path loads nothing ($rc)" test ! -e "$t/LOADED"
  check "... and says why (the task field is not a name): $o" has "$o" 'field "task" is not a name'
  evil=$t/'o$(touch PWNED)`touch PWNED2`'
  o=$(cd "$t" && k matrix --slurm --slurm-script-only --plugins fixture --tasks hostile_predict --out "$evil"); rc=$?
  line=$(grep -F 'J=$(sbatch' <<<"$o")
  check "the slurm 'submit with:' line is printed ($rc): $o" test -n "$line"
  mkdir -p "$t/bin" && printf '#!/bin/sh\necho 42\n' >"$t/bin/sbatch" && chmod +x "$t/bin/sbatch"
  (cd "$t" && PATH=$t/bin:$PATH bash -c "$line" >/dev/null 2>&1)
  check "pasting it runs nothing from the path" test ! -e "$t/PWNED" -a ! -e "$t/PWNED2"
  ;;
signals)
  task slow
  for sig in TERM INT; do
    out=$t/s$sig
    # a non-interactive shell starts background jobs with SIGINT ignored: give the run the default back
    env --default-signal=INT "$bin" run --plugin fixture --device cpu --task hostile_slow --epochs 20 --out "$out" >"$t/$sig.log" 2>&1 &
    pid=$!
    bgpids+=("$pid")
    for i in $(seq 1 200); do [ -e "$out/hostile_slow/fixture__cpu.json" ] && break; sleep 0.05; done
    kill -$sig $pid
    wait $pid; rc=$?
    want=$((128 + $(kill -l $sig)))
    check "run stopped by SIG$sig exits $want ($rc)" test $rc -eq $want
    check "... its record says interrupted" test "$(json_field "$out/hostile_slow/fixture__cpu.json" status)" = interrupted
    check "... with the epochs done: $(json_field "$out/hostile_slow/fixture__cpu.json" reason)" \
      grep -qE "interrupted by SIG$sig after [1-9][0-9]* of 20 epochs" "$out/hostile_slow/fixture__cpu.json"
  done
  # a signal during the warm-up steps (before epoch 1) stops the run too, with a record of 0 epochs
  out=$t/swarm
  env --default-signal=INT "$bin" run --plugin fixture --device cpu --task hostile_slow --epochs 20 --warmup-steps 100000 \
    --out "$out" >"$t/warm.log" 2>&1 &
  pid=$!
  bgpids+=("$pid")
  sleep 1
  kill -TERM $pid
  for i in $(seq 1 100); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done
  alive=0; kill -0 $pid 2>/dev/null && alive=1
  check "run stopped by SIGTERM during the warm-up ends within 5 s" test $alive -eq 0
  [ $alive -eq 1 ] && kill -KILL $pid
  wait $pid; rc=$?
  check "... exits 143 ($rc)" test $rc -eq 143
  check "... its record says interrupted after 0 of 20 epochs" \
    grep -qE "interrupted by SIGTERM after 0 of 20 epochs" "$out/hostile_slow/fixture__cpu.json"
  o=$(k report "$t/sTERM"); rc=$?
  check "report lists the cell as interrupted: $o" has "$o" "interrupted"
  out=$t/mx
  "$bin" matrix --plugins fixture --tasks hostile_slow --epochs 20 --out "$out" >"$t/mx.log" 2>&1 &
  mpid=$!
  bgpids+=("$mpid")
  for i in $(seq 1 200); do [ -e "$out/hostile_slow/fixture__cpu.json" ] && break; sleep 0.05; done
  kill -TERM $mpid
  wait $mpid
  check "matrix stopped by SIGTERM: the cell is interrupted" test "$(json_field "$out/hostile_slow/fixture__cpu.json" status)" = interrupted
  o=$(k matrix --plugins fixture --tasks hostile_slow --epochs 1 --out "$out" --resume); rc=$?
  check "--resume re-runs the interrupted cell ($rc): $o" test "$(json_field "$out/hostile_slow/fixture__cpu.json" status)" = ok
  ;;
resume)
  task predict
  m="matrix --plugins fixture --tasks hostile_predict --epochs 1 --out $t/rs"
  rec=$t/rs/hostile_predict/fixture__cpu.json
  o=$(k $m --limit-train 64); rc=$?
  check "a first matrix with --limit-train 64 ($rc): $o" test "$(json_field "$rec" status)" = ok
  o=$(k $m --limit-train 64 --resume)
  check "--resume with the same limit skips the cell: $o" has "$o" "skipped"
  o=$(k $m --limit-train 32 --resume)
  check "--resume with another --limit-train re-runs it: $o" grep -qE "hostile_predict x cpu \.\.\. ok" <<<"$o"
  o=$(k $m --limit-train 32 --limit-val 8 --resume)
  check "--resume with another --limit-val re-runs it: $o" grep -qE "hostile_predict x cpu \.\.\. ok" <<<"$o"
  python3 -c "import json,sys; p=sys.argv[1]; r=json.load(open(p)); r['epochs']=[]; json.dump(r, open(p,'w'))" "$rec"
  o=$(k $m --limit-train 32 --limit-val 8 --resume)
  check "--resume re-runs an 'ok' record without epochs: $o" grep -qE "hostile_predict x cpu \.\.\. ok" <<<"$o"
  ;;
cache)
  task predict
  mkdir -p "$t/wc" && chmod 0777 "$t/wc"
  o=$(XDG_CACHE_HOME=$t/wc k --list); rc=$?
  check "--list under a world-writable, non-sticky cache folder still works ($rc)" test $rc -eq 0
  check "... with one warning naming the folder: $o" has "$o" "$t/wc is world-writable without the sticky bit"
  check "... and no module cache written there" test ! -e "$t/wc/khost/modules.cache"
  o=$(XDG_CACHE_HOME=$t/wc k run $T --task hostile_predict --epochs 1); rc=$?
  check "a run there works ($rc) and saves no CPU peak: $o" test $rc -eq 0 -a ! -e "$t/wc/khost/peak-cpu.txt"
  chmod 1777 "$t/wc"
  o=$(XDG_CACHE_HOME=$t/wc k --list); rc=$?
  check "the same folder with the sticky bit is trusted: the cache is written ($rc): $o" test -s "$t/wc/khost/modules.cache"
  ;;
compiler)
  th=$(dirname "$bin")/plugins/theano.so
  [ -f "$th" ] || { echo "skip: no theano plugin built at $th" >&2; exit 77; }
  task predict
  printf '#!/bin/sh\nexec sleep 977.4321 # khost-hostile-cc %s\n' "$t" >"$t/hangcc" && chmod 0755 "$t/hangcc"
  printf '[khost]\nplugin_dirs = %s\ntask_dirs = %s/tasks\ndata_dir = %s/data\n[plugin theano]\ncc = %s/hangcc\ncc_timeout = 2\ncache_dir = %s/thc\n' \
    "$(dirname "$th")" "$t" "$t" "$t" "$t" >"$t/th.ini"
  sleeping() { pgrep -f "sleep 977.4321" -a 2>/dev/null | grep -c . ; }
  before=$(sleeping)
  o=$(KHOST_CONF=$t/th.ini k run --plugin theano --task hostile_predict --device cpu --epochs 1 --out "$t/r"); rc=$?
  check "a compiler that never returns: run ends with an error, not a hang ($rc): $o" test $rc -eq 1
  check "... naming the deadline" has "$o" "did not finish within 2 s ([plugin theano] cc_timeout)"
  check "... and no compiler is left" test "$(sleeping)" -le "$before"
  sed -i 's/^cc_timeout = 2$/cc_timeout = 600/' "$t/th.ini"
  for sig in TERM KILL; do
    KHOST_CONF=$t/th.ini "$bin" run --plugin theano --task hostile_predict --device cpu --epochs 1 --out "$t/r$sig" >"$t/th$sig.log" 2>&1 &
    pid=$!
    bgpids+=("$pid")
    # up to 60 s: before the compile the cell calibrates the machine's ceilings (seconds, more under ASan)
    for i in $(seq 1 1200); do [ "$(sleeping)" -gt "$before" ] && break; sleep 0.05; done
    check "the compiler is running before SIG$sig" test "$(sleeping)" -gt "$before"
    kill -$sig $pid
    wait $pid; rc=$?
    sleep 0.5
    check "SIG$sig to khost during the compile: khost ends ($rc) and the compiler dies with it" test "$(sleeping)" -le "$before"
  done
  check "SIGTERM during the compile is recorded as interrupted" grep -q '"interrupted"' "$t/rTERM/hostile_predict/theano__cpu.json"
  ;;
locale)
  task predict
  mkdir -p "$t/loc"
  if ! localedef -i de_DE -f UTF-8 "$t/loc/de_DE.utf8" >/dev/null 2>&1; then
    echo "skip: cannot build a de_DE locale with localedef" >&2
    exit 77
  fi
  # the control: the locale exists and does give a decimal comma
  comma=$(LOCPATH=$t/loc LC_ALL=de_DE.UTF-8 python3 -c "import locale; locale.setlocale(locale.LC_ALL, ''); print(locale.format_string('%.1f', 0.5))")
  check "the test locale has a decimal comma ($comma)" test "$comma" = "0,5"
  task locale
  o=$(LOCPATH=$t/loc LC_ALL=de_DE.UTF-8 k run $T --task hostile_locale); rc=$?
  check "the cell of a module that calls setlocale(LC_ALL, \"\") runs ($rc): $o" test $rc -eq 0
  csv=$t/r/hostile_locale/fixture__cpu.csv
  check "its CSV numbers keep the decimal point: $(sed -n 2p "$csv")" grep -qE '^1,[0-9.e+-]+,[0-9]+\.[0-9]' "$csv"
  check "... and no decimal comma" test -z "$(sed -n '2,$p' "$csv" | grep -E '[0-9],[0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]+,[0-9]')"
  check "the JSON record parses as C numbers" python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$t/r/hostile_locale/fixture__cpu.json"
  ;;
world)
  # empty option values name nothing: refused, never a silent default (the root as --out, cpu as --device)
  for args in "run --plugin fixture --task hostile_chdir --device ''" "run --plugin fixture --task hostile_chdir --out ''" \
              "matrix --plugins fixture --tasks hostile_chdir --out ''" "report $t --html ''"; do
    o=$(eval k "$args"); rc=$?
    check "$args: exit 2 ($rc): $o" test $rc -eq 2
    check "... saying the value is empty" has "$o" "not an empty one"
  done
  task chdir; task stdout; task rmout; task fork; task swapout
  # a module's helpers that leave khost's session and are orphaned: ended with the cell (run, then a matrix)
  for how in run matrix; do
    mkdir -p "$t/fork-$how" && : >"$t/fork-$how/helpers"
    if [ $how = run ]; then
      o=$(HOSTILE_DIR=$t/fork-$how k run --plugin fixture --task hostile_fork --device cpu --epochs 1 --out "$t/fr"); rc=$?
    else
      o=$(HOSTILE_DIR=$t/fork-$how k matrix --plugins fixture --tasks hostile_fork --devices cpu --epochs 1 --out "$t/fm"); rc=$?
    fi
    check "$how of a cell whose module leaves helpers ($rc): $o" test $rc -eq 0
    check "... the helpers were started" test "$(wc -l <"$t/fork-$how/helpers")" -eq 2
    if [ $how = run ]; then
      check "... and said to be ended: $o" has "$o" "left 2 process(es) running"
    else # a matrix cell runs --quiet: its record says it
      check "... and the record says they were ended" grep -q '"processes_left_running":[[:space:]]*"2"' "$t/fm/hostile_fork/fixture__cpu.json"
    fi
    alive=
    for p in $(cat "$t/fork-$how/helpers"); do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    check "... none outlives the cell:$alive" test -z "$alive"
    for p in $alive; do kill -9 "$p"; done
  done
  # backends that break the ABI: each cell an error naming the call, never a crash or an impossible record
  backend nullmodel; backend envpast; backend metrics
  for w in "nullmodel:compile returned OK without a model" "envpast:environment() wrote past the buffer" \
           "metrics:read_metrics(training) returned"; do
    way=${w%%:*} says=${w#*:}
    o=$(HOSTILE_DIR=$t k run --plugin hostile_$way --task hostile_chdir --device cpu --epochs 1 --out "$t/abi"); rc=$?
    check "hostile_$way: exit 1, not a crash ($rc): $o" test $rc -eq 1
    check "... naming the call: $says" has "$o" "$says"
    check "... recorded as error" test "$(json_field "$t/abi/hostile_chdir/hostile_${way}__cpu.json" status)" = error
  done
  # a module that crashes: the cell is crashed, naming the module and the call (the batch ends at a guard page,
  # so the task's overrun faults in get_batch itself)
  task overrun; backend segv
  o=$(k run --plugin fixture --task hostile_overrun --device cpu --epochs 1 --out "$t/crash"); rc=$?
  asan=$(ldd "$bin" 2>/dev/null | grep -c libasan) # ASan reports the SIGSEGV and exits 1
  check "a task writing past its batch buffer dies of SIGSEGV ($rc)" test $rc -eq 139 -o \( "$asan" -gt 0 -a $rc -eq 1 \)
  check "... named on the way: $o" has "$o" "khost: crashed in task 'hostile_overrun' get_batch"
  o=$(HOSTILE_DIR=$t k matrix --plugins hostile_segv --tasks hostile_chdir --devices cpu --epochs 1 --out "$t/crash"); rc=$?
  j=$t/crash/hostile_chdir/hostile_segv__cpu.json
  check "a backend crashing in train_batch: the matrix records crashed ($rc)" test "$(json_field "$j" status)" = crashed
  check "... with the module and the call: $(json_field "$j" reason)" has "$(json_field "$j" reason)" \
    "in backend 'hostile_segv' train_batch"
  # the weights the host hands a backend end at a guard page too: a read past them faults in set_weight
  backend weightpast
  o=$(HOSTILE_DIR=$t k run --plugin hostile_weightpast --task hostile_chdir --device cpu --epochs 1 --out "$t/crash"); rc=$?
  check "a backend reading past its weights dies of SIGSEGV ($rc)" test $rc -eq 139 -o \( "$asan" -gt 0 -a $rc -eq 1 \)
  check "... named on the way: $o" has "$o" "khost: crashed in backend 'hostile_weightpast' set_weight"
  # a backend whose profile breaks the contract: exit 1 naming the row and the field, never a read past the rows
  # or a NaN printed as a figure
  for w in "profrows:rows the host gave" "profnan:row 0 (dense): forward_s is not a time" \
           "profname:row 0: 'what' is not terminated" "profsplit:input_s 1 + weight_s 1 s is more than backward_s 0.5 s"; do
    way=${w%%:*} says=${w#*:}
    backend $way
    o=$(HOSTILE_DIR=$t k profile --plugin hostile_$way --task hostile_chdir --device cpu --steps 2); rc=$?
    check "profile of hostile_$way: exit 1, not a crash ($rc): $o" test $rc -eq 1
    check "... naming the row and field: $says" has "$o" "$says"
    check "... and printing no table" test -z "$(grep -E '^[0-9]+ ' <<<"$o")"
  done
  # a module that changes the working directory: the relative --out was resolved at start
  mkdir -p "$t/elsewhere" "$t/cwd"
  o=$(cd "$t/cwd" && HOSTILE_DIR=$t/elsewhere k run --plugin fixture --task hostile_chdir --device cpu --epochs 1 --out rel); rc=$?
  check "the chdir cell runs ($rc): $o" test $rc -eq 0
  check "... its record is under the --out named at start" test -s "$t/cwd/rel/hostile_chdir/fixture__cpu.json"
  check "... and nothing under the module's folder" test -z "$(ls -A "$t/elsewhere")"
  # a module printing to stdout: run --json's stdout is the record alone, one line
  o=$(timeout 60 "$bin" run --plugin fixture --task hostile_stdout --device cpu --epochs 1 --out "$t/r" --json 2>"$t/stdout.err"); rc=$?
  check "run --json of a chatty module ($rc)" test $rc -eq 0
  check "... stdout is one line: $o" test "$(printf '%s\n' "$o" | wc -l)" -eq 1
  check "... and it is the record" python3 -c "import json,sys; r = json.loads(sys.argv[1]); assert r['status'] == 'ok'" "$o"
  check "... the module's words went to stderr" grep -q "a module's chatter" "$t/stdout.err"
  # a results folder removed while the matrix runs: said, with a non-zero exit
  o=$(HOSTILE_DIR=$t/gone k matrix --plugins fixture --tasks hostile_rmout --devices cpu --epochs 2 --out "$t/gone"); rc=$?
  check "a removed results folder fails the matrix ($rc): $o" test $rc -ne 0
  check "... naming it" has "$o" "the results folder $t/gone was removed while the matrix ran"
  # the results folder (or its task folder) moved away during a cell and a link to a decoy put in its place:
  # the record goes where khost opened at the start, never through the link
  for how in run matrix; do
    d=$t/swap-$how
    mkdir -p "$d"
    o=$(HOSTILE_DIR=$d k $how $([ $how = run ] && echo "--plugin fixture --task" || echo "--plugins fixture --tasks") \
      hostile_swapout $([ $how = run ] && echo "--device" || echo "--devices") cpu --epochs 2 --out "$d"); rc=$?
    check "$how: a results folder swapped for a link fails with exit 8 ($rc): $o" test $rc -eq 8
    check "... saying so" has "$o" "the results folder $d was moved or replaced while the"
    check "... the record is in the folder that moved" test -s "$d.away/hostile_swapout/fixture__cpu.json"
    check "... nothing went through the link: $(ls -A "$d.decoy")" test -z "$(ls -A "$d.decoy")"
  done
  d=$t/swap-sub && mkdir -p "$d"
  o=$(HOSTILE_DIR=$d HOSTILE_SUB=hostile_swapout k run --plugin fixture --task hostile_swapout --device cpu --epochs 2 --out "$d"); rc=$?
  check "a task folder swapped for a link: the record is refused, exit 8 ($rc): $o" test $rc -eq 8
  check "... naming the link" has "$o" "hostile_swapout/fixture__cpu.csv: cannot write: a folder on its way is a symbolic link"
  check "... nothing went through the link: $(ls -A "$d.decoy")" test -z "$(ls -A "$d.decoy")"
  # the lock file's place taken by a link: never followed, the named file untouched
  mkdir -p "$t/locked" && echo precious >"$t/precious" && ln -s "$t/precious" "$t/locked/.khost.lock"
  o=$(k matrix --plugins fixture --tasks hostile_chdir --devices cpu --epochs 1 --out "$t/locked"); rc=$?
  check "a linked lock file is refused ($rc): $o" test $rc -ne 0
  check "... saying so" has "$o" "symbolic link (not followed)"
  check "... and the file it names is untouched" test "$(cat "$t/precious")" = precious
  # over a file-size limit the record cannot be written: said, not a silent SIGXFSZ death
  mkdir -p "$t/big"
  o=$(cd "$t/cwd" && HOSTILE_DIR=$t/elsewhere bash -c "ulimit -f 1; exec timeout 60 '$bin' run --plugin fixture --task hostile_chdir --device cpu --epochs 1 --out '$t/big'" 2>&1); rc=$?
  check "under ulimit -f the run ends with an exit code, not SIGXFSZ ($rc): $o" test $rc -ne 153 -a $rc -ne 0
  check "... naming the record it could not write" has "$o" "File too large"
  ;;
esac
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
