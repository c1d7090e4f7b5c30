#!/usr/bin/env bash
# tests/setfile/test_setfile.sh KHOST E2E_DIR — `khost pack` and the packed folder as report and compare read it.
#   1. a fixture matrix (2 plugins x 2 tasks, 3 repetitions) packed with --remove: the task folders' files are
#      gone, other files stay; report (text, --html), compare (Markdown, --json) and compare of packed against
#      unpacked give byte for byte what they gave on the files;
#   1b. --unpack writes the files back byte for byte (report as before, --resume reruns nothing finished) and
#      refuses to write over a record file;
#   2. run and matrix refuse to add results to a packed folder; a packed folder with a task folder beside it
#      is read from the pack, with a warning;
#   3. hostile packs (truncated gzip, a path with .., a path twice, a count that does not match, a line that
#      is not JSON, an extra field, not gzip at all but plain text, a FIFO in its place): each refused with
#      exit 8 naming the pack (and the line where there is one), never a crash or a hang.
set -u
bin=$1 e2e=$2
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-setfile-XXXXXX")
trap 'rm -rf "$t"' EXIT
cat >"$t/khost.ini" <<EOF2
[khost]
plugin_dirs = $e2e/plugins
task_dirs = $e2e/tasks
data_dir = $t/data
results_dir = $t/results
default_device = cpu
EOF2
export KHOST_CONF=$t/khost.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
k() { timeout 120 "$bin" "$@"; }

# --- 1. pack and read back ---------------------------------------------------------------------------------
o=$(k matrix --plugins fixture,fixture_nan --tasks fixture_blobs,fixture_conv --devices cpu --epochs 2 --repeat 3 \
  --order-seed 5 --out "$t/set" 2>&1)
check "the fixture matrix ran: $o" test -n "$(ls "$t/set/fixture_blobs/"*.rep3.json 2>/dev/null)"
echo "notes" >"$t/set/README.md"
cp -r "$t/set" "$t/files"
k report "$t/set" >"$t/r1" 2>"$t/r1.err"; r1=$?
k report "$t/set" --html "$t/h1.html" >/dev/null 2>&1
k compare "$t/set" "$t/files" >"$t/c1" 2>&1
k compare "$t/set" "$t/files" --json >"$t/j1" 2>&1
n_files=$(find "$t/set" -name '*.json' -path '*/fixture_*/*' ! -name '*.stats.json' | wc -l)
o=$(k pack "$t/set" --remove 2>&1); rc=$?
check "pack: exit 0 ($rc): $o" test $rc -eq 0
check "... names how many files: $n_files" has "$o" "pack: $n_files record file(s) of $t/set in $t/set/records.jsonl.gz"
check "... the task folders are gone" test ! -e "$t/set/fixture_blobs" -a ! -e "$t/set/fixture_conv"
check "... other files stay" test -s "$t/set/README.md"
check "... the pack is gzip" test "$(head -c 2 "$t/set/records.jsonl.gz" | od -An -tx1 | tr -d ' ')" = 1f8b
k report "$t/set" >"$t/r2" 2>"$t/r2.err"; r2=$?
check "report of the packed folder: exit $r2 as before ($r1)" test $r2 -eq $r1
check "... the same text" cmp -s "$t/r1" "$t/r2"
check "... the same messages" cmp -s "$t/r1.err" "$t/r2.err"
k report "$t/set" --html "$t/h2.html" >/dev/null 2>&1
check "... the same page" cmp -s "$t/h1.html" "$t/h2.html"
k compare "$t/set" "$t/files" >"$t/c2" 2>&1
check "compare packed against files: as files against files" cmp -s "$t/c1" "$t/c2"
k compare "$t/set" "$t/files" --json >"$t/j2" 2>&1
check "... --json too" cmp -s "$t/j1" "$t/j2"
o=$(k compare "$t/files" "$t/set" 2>&1)
check "... and the other way round, no cell faster or slower: $o" \
  test -z "$(grep -E '\| (faster|slower) *\|' <<<"$o")" -a -n "$(grep -E '\| (unchanged|too noisy to tell|inconclusive) *\|' <<<"$o")"
o=$(k pack "$t/empty" 2>&1); rc=$?
check "pack of a folder without records: exit 8 ($rc): $o" test $rc -eq 8

for cmd in run matrix; do
  if [ $cmd = run ]; then o=$(k run --plugin fixture --task fixture_blobs --device cpu --epochs 1 --out "$t/set" 2>&1)
  else o=$(k matrix --plugins fixture --tasks fixture_blobs --devices cpu --epochs 1 --out "$t/set" 2>&1); fi; rc=$?
  check "$cmd into a packed folder is refused, exit 8 ($rc): $o" test $rc -eq 8
  check "... saying why" has "$o" "$t/set holds a packed set (records.jsonl.gz, khost pack)"
  check "... adding nothing" test ! -e "$t/set/fixture_blobs"
done

# --- 1b. unpack: the pack written back as the files, so a set can be resumed and packed again ---------------
cp -r "$t/set" "$t/un"
o=$(k pack "$t/un" --unpack 2>&1); rc=$?
check "unpack: exit 0 ($rc): $o" test $rc -eq 0
check "... names how many files" has "$o" "$n_files record file(s) of $t/un written back"
check "... the pack is gone" test ! -e "$t/un/records.jsonl.gz"
same=1
for f in $(cd "$t/files" && find . -name '*.json' -path '*/fixture_*/*' ! -name '*.stats.json'); do
  cmp -s "$t/files/$f" "$t/un/$f" || { same=0; echo "differs: $f" >&2; }
done
check "... every record file byte for byte what was packed" test $same -eq 1
k report "$t/un" >"$t/r3" 2>/dev/null
check "... report reads it as before" cmp -s "$t/r1" "$t/r3"
o=$(k matrix --plugins fixture,fixture_nan --tasks fixture_blobs,fixture_conv --devices cpu --epochs 2 --repeat 3 \
  --order-seed 5 --out "$t/un" --resume 2>&1)
n_skip=$(grep -c '^\[.*\] fixture.* \.\.\. skipped (recorded \(ok\|unsupported\))$' <<<"$o")
check "... matrix --resume on this machine and build skips the 9 finished cells, reruns only the 3 diverged ($n_skip)" \
  test "$n_skip" -eq 9 -a "$(grep -c 'diverged: training loss' <<<"$o")" -eq 3 -a -z "$(grep 'rerun:' <<<"$o")"
o=$(k pack "$t/un" --unpack 2>&1); rc=$?
check "unpack without a pack: exit 8 ($rc): $o" test $rc -eq 8
cp -r "$t/set" "$t/un2" && mkdir -p "$t/un2/fixture_blobs" && echo '{}' >"$t/un2/fixture_blobs/fixture__cpu.rep1.json"
o=$(k pack "$t/un2" --unpack 2>&1); rc=$?
check "unpack over an existing record file is refused, exit 8 ($rc): $o" test $rc -eq 8 -a -e "$t/un2/records.jsonl.gz"
check "... naming it" has "$o" "fixture_blobs/fixture__cpu.rep1.json is in its pack and in its folder"

# --- 2. a task folder beside the pack ------------------------------------------------------------------------
mkdir -p "$t/set/fixture_blobs" && cp "$t/files/fixture_blobs/fixture__cpu.rep1.json" "$t/set/fixture_blobs/"
o=$(k report "$t/set" 2>&1 >/dev/null)
check "a loose task folder beside the pack: warned: $o" has "$o" "records are read from records.jsonl.gz only"
rm -rf "$t/set/fixture_blobs"
# packing again keeps what the pack holds: a file already in it (the same bytes) or a new one joins; a file that
# differs from the pack's copy is refused and left where it is
mkdir -p "$t/set/fixture_blobs" && cp "$t/files/fixture_blobs/fixture__cpu.rep1.json" "$t/set/fixture_blobs/"
sed 's/"khost_record"/"khost_record"/' "$t/files/fixture_blobs/fixture__cpu.rep1.json" |
  python3 -c 'import json,sys; r=json.load(sys.stdin); r["repeat"]["index"]=9; print(json.dumps(r))' >"$t/set/fixture_blobs/fixture__cpu.rep9.json"
o=$(k pack "$t/set" --remove 2>&1); rc=$?
check "packing again: the pack's files and one new one ($rc): $o" has "$o" "pack: $((n_files + 1)) record file(s)"
check "... the loose files went" test ! -e "$t/set/fixture_blobs"
o=$(k report "$t/set" 2>&1)
check "... and all are read" has "$(zcat "$t/set/records.jsonl.gz" | head -n 1)" "\"files\":$((n_files + 1))"
mkdir -p "$t/set/fixture_blobs"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["metric_value"]=0.5; print(json.dumps(r))' \
  "$t/files/fixture_blobs/fixture__cpu.rep1.json" >"$t/set/fixture_blobs/fixture__cpu.rep1.json"
o=$(k pack "$t/set" --remove 2>&1); rc=$?
check "a file that differs from the pack's copy: refused, exit 8 ($rc): $o" test $rc -eq 8 -a -n "$(grep -F 'with other contents' <<<"$o")"
check "... and left where it is" test -s "$t/set/fixture_blobs/fixture__cpu.rep1.json"
rm -rf "$t/set/fixture_blobs"

# --- 3. hostile packs ----------------------------------------------------------------------------------------
zcat "$t/set/records.jsonl.gz" >"$t/plain.jsonl"
line2=$(sed -n 2p "$t/plain.jsonl")
hostile() { # name, then the pack's text on stdin (gzipped here unless name ends in -raw)
  mkdir -p "$t/h/$1"
  if [[ $1 == *-raw ]]; then cat >"$t/h/$1/records.jsonl.gz"; else gzip -c >"$t/h/$1/records.jsonl.gz"; fi
}
printf '{"khost_set":1,"files":1}\n%s\n' "$(sed 's|"path":"[^"]*"|"path":"../../etc/x.json"|' <<<"$line2")" | hostile dotdot
printf '{"khost_set":1,"files":2}\n%s\n%s\n' "$line2" "$line2" | hostile twice
printf '{"khost_set":1,"files":5}\n%s\n' "$line2" | hostile count
printf '{"khost_set":1,"files":1}\nnot json\n' | hostile notjson
printf '{"khost_set":1,"files":1}\n%s\n' "$(sed 's|^{|{"x":1,|' <<<"$line2")" | hostile extra
printf '{"khost_set":2,"files":0}\n' | hostile version
printf '{"khost_set":1,"files":1}\n{"path":"fixture_blobs/fixture__cpu.json","text":"{\\"khost_record\\":1,\\"status\\":\\"ok\\",\\"status\\":\\"error\\"}"}\n' | hostile dupkey
head -c 300 "$t/set/records.jsonl.gz" | hostile truncated-raw
cat "$t/plain.jsonl" | hostile plain-raw
mkdir -p "$t/h/fifo" && mkfifo "$t/h/fifo/records.jsonl.gz"
for w in "dotdot:line 2: field path is not" "twice:is in it twice" "count:holds 1 file(s), its first line says 5" \
         "notjson:line 2: not a JSON object" "extra:line 2: a line must hold a string path and a string text" \
         "version:line 1: not a khost pack of version 1" "truncated-raw:not a readable pack" \
         "fifo:not a regular file"; do
  name=${w%%:*} says=${w#*:}
  for cmd in report compare; do
    if [ $cmd = report ]; then o=$(k report "$t/h/$name" 2>&1); else o=$(k compare "$t/h/$name" "$t/files" 2>&1); fi; rc=$?
    check "$cmd of the $name pack: exit 8 ($rc): $o" test $rc -eq 8
    check "... naming it: $says" has "$o" "$t/h/$name/records.jsonl.gz"
    check "... and why: $says" has "$o" "$says"
  done
done
o=$(k report "$t/h/dupkey" 2>&1); rc=$?
check "a packed record with a key twice is refused as the file would be: $o" has "$o" "dupkey/fixture_blobs/fixture__cpu.json: key \"status\" twice"
o=$(k report "$t/h/plain-raw" 2>&1); rc=$?
check "an uncompressed pack is read too ($rc)" test $rc -eq 0 -a -n "$(grep -F '| fixture |' <<<"$o")"
finish test_setfile
