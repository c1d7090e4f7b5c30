#!/usr/bin/env bash
# tests/resultsdb/test_db.sh KHOST E2E_DIR — the results database.
#   1. matrix --db: every record of the run in the database as the set named by the folder; report of the
#      database's set is byte for byte report of the folder, compare of two sets as compare of two folders;
#   2. import is idempotent (again: nothing new; a packed copy as another set: no record stored twice), the
#      folders are never changed; filters (rev=, machine=, a bad one);
#   3. six importers at once into one database: all succeed, every set complete, integrity_check ok;
#   4. an import SIGKILLed in its transaction (its WAL already megabytes long): the database is consistent, the
#      set not in it; the import done again completes;
#   5. refused and left as they were: random bytes, a truncated database, another program's database, one
#      from a newer khost;
#   6. a database of schema 1: refused by a reader (which writes nothing), migrated to 2 by khost db list (the
#      machine column filled from each record's text).
set -u
bin=$1 e2e=$2
. "$(dirname "$0")/../checks.sh"
t=$(mktemp -d "${TMPDIR:-/tmp}/khost-db-XXXXXX")
bg=()
trap 'for p in "${bg[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf "$t"' EXIT
export KHOST_CONF=$e2e/khost-test.ini KHOST_LIBCUDA=/nonexistent/libcuda.so.1 XDG_CACHE_HOME=$t/cache
k() { timeout 120 "$bin" "$@"; }
sql() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); print("\n".join("|".join(map(str,x)) for x in r))' "$@"; }
sums() { find "$1" -type f -exec sha256sum {} + | sort; }
db=$t/results.db

# --- 1. matrix --db ---------------------------------------------------------------------------------------
o=$(k matrix --plugins fixture,fixture_nan --tasks fixture_blobs,fixture_conv --devices cpu --epochs 1 --repeat 2 \
  --order-seed 3 --out "$t/a" --db "$db" 2>&1); rc=$?
check "matrix --db ran ($rc): $o" test -s "$db"
n_a=$(find "$t/a" -name '*.json' ! -name '*.stats.json' -path '*/fixture_*/*' | wc -l)
check "the database holds the folder's $n_a records as the set $t/a" test "$(sql "$db" "select count(*) from set_files f join sets s on s.id = f.set_id where s.name = '$t/a'")" = "$n_a"
check "... WAL mode" test "$(sql "$db" "pragma journal_mode")" = wal
check "... schema 2" test "$(sql "$db" "pragma user_version")" = 2
k report "$t/a" >"$t/r1" 2>&1
k report "$db:set=$t/a" >"$t/r2" 2>&1
check "report of the database's set is report of the folder" cmp -s "$t/r1" "$t/r2"
k matrix --plugins fixture --tasks fixture_blobs --devices cpu --epochs 1 --repeat 2 --order-seed 4 --out "$t/b" >/dev/null 2>&1
k compare "$t/a" "$t/b" 2>&1 | grep '^|' >"$t/c1"
sums "$t/b" >"$t/b.sums"
o=$(k db import "$db" "$t/b" 2>&1); rc=$?
check "import of a second folder ($rc): $o" has "$o" "$t/b: 2 file(s), 2 record(s) new to the database, 0 skipped"
k compare "$db:set=$t/a" "$db:set=$t/b" 2>&1 | grep '^|' >"$t/c2"
check "compare of two sets is compare of the two folders" cmp -s "$t/c1" "$t/c2"

# --- 2. idempotent, folders untouched, filters --------------------------------------------------------------
o=$(k db import "$db" "$t/b" 2>&1)
check "importing again stores nothing new: $o" has "$o" "$t/b: 2 file(s), 0 record(s) new to the database"
cp -r "$t/b" "$t/bp" && k pack "$t/bp" --remove >/dev/null
o=$(k db import "$db" "$t/bp" --set packed-copy 2>&1)
check "a packed copy as another set: its records are known: $o" has "$o" "$t/bp: 2 file(s), 0 record(s) new"
check "... and the folder was only read" test "$(sums "$t/b")" = "$(cat "$t/b.sums")"
check "three sets listed" test "$(k db list "$db" | wc -l)" -eq 3
check "records stored once: $(sql "$db" "select count(*) from records")" test "$(sql "$db" "select count(*) from records")" -eq $((n_a + 2))
rev=$(sql "$db" "select git_rev from records limit 1")
o=$(k report "$db:set=$t/a,rev=${rev:0:6}" 2>&1); rc=$?
check "a revision filter ($rc)" test $rc -eq 0 -a -n "$(grep -F '| fixture |' <<<"$o")"
o=$(k report "$db:rev=zzzz" 2>&1); rc=$?
check "a revision no record has: no records, exit 8 ($rc)" test $rc -eq 8
cpu=$(sql "$db" "select json_extract(text, '\$.environment.cpu_model') from records limit 1")
o=$(k report "$db:set=$t/b,machine=$cpu" 2>&1); rc=$?
check "a machine filter ($rc): $cpu" test $rc -eq 0
o=$(k report "$db" 2>&1)
check "every set at once: the files of several sets said: $o" has "$o" "are in more than one set: the latest finished of each is read"
o=$(k report "$db:colour=red" 2>&1); rc=$?
check "an unknown filter: exit 8 naming it ($rc)" test $rc -eq 8 -a -n "$(grep -F "'colour' is not a filter" <<<"$o")"

# --- 3. six importers at once -------------------------------------------------------------------------------
for i in 1 2 3 4 5 6; do
  mkdir -p "$t/many$i/fixture_blobs"
  for f in "$t"/a/fixture_blobs/*.json; do sed "s/\"seed\":/\"seed_note\": \"copy $i\", \"seed\":/" "$f" >"$t/many$i/fixture_blobs/$(basename "$f")"; done
done
pids=()
for i in 1 2 3 4 5 6; do k db import "$db" "$t/many$i" >"$t/imp$i.out" 2>&1 & pids+=($!); done
ok=0; for p in "${pids[@]}"; do wait "$p" && ok=$((ok + 1)); done
check "six importers at once: all succeed ($ok)" test $ok -eq 6
n_m=$(ls "$t/many1/fixture_blobs" | grep -vc stats)
for i in 1 2 3 4 5 6; do
  check "... set $i complete" test "$(sql "$db" "select count(*) from set_files f join sets s on s.id = f.set_id where s.name = '$t/many$i'")" = "$n_m"
done
check "... integrity_check ok" test "$(sql "$db" "pragma integrity_check")" = ok

# --- 4. a killed import ---------------------------------------------------------------------------------------
mkdir -p "$t/big/fixture_blobs"
src=$(ls "$t"/a/fixture_blobs/fixture__cpu.rep1.json)
python3 - "$src" "$t/big/fixture_blobs" <<'PY'
import sys
text = open(sys.argv[1]).read()
for i in range(20000):
    with open("%s/fixture__c%d.json" % (sys.argv[2], i), "w") as f:
        f.write(text.replace('"seed":', '"seed_note": "%d", "seed":' % i, 1))
PY
"$bin" db import "$db" "$t/big" >/dev/null 2>&1 & p=$!; bg+=($p)
# killed once its transaction has written megabytes into the WAL (cache spills), before its commit
for _ in $(seq 1 1000); do [ "$(stat -c %s "$db-wal" 2>/dev/null || echo 0)" -gt 8000000 ] && break; kill -0 $p 2>/dev/null || break; sleep 0.01; done
kill -9 $p 2>/dev/null; wait $p 2>/dev/null
n=$(sql "$db" "select count(*) from set_files f join sets s on s.id = f.set_id where s.name = '$t/big'")
check "a killed import: nothing of it ($n of 20000)" test "$n" = 0
check "... integrity_check ok" test "$(sql "$db" "pragma integrity_check")" = ok
o=$(k db import "$db" "$t/big" 2>&1); rc=$?
check "... and the import done again completes ($rc)" test $rc -eq 0 -a "$(sql "$db" "select count(*) from set_files f join sets s on s.id = f.set_id where s.name = '$t/big'")" = 20000

before=$(sha256sum <"$db")
k report "$db:set=$t/a" >/dev/null 2>&1; k history "$db" >/dev/null 2>&1
check "report and history only read the database" test "$(sha256sum <"$db")" = "$before"

# --- 5. databases refused and left as they were ----------------------------------------------------------------
head -c 5000 /dev/urandom >"$t/random.db"
cp "$db" "$t/cut.db" && truncate -s 8192 "$t/cut.db"
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("create table notes(x)"); c.commit()' "$t/other.db"
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("pragma user_version=99"); c.execute("create table t(x)"); c.commit()' "$t/future.db"
for w in "random:not an SQLite database" "cut:" "other:not khost's" "future:schema version 99 is from a newer khost"; do
  name=${w%%:*} says=${w#*:}
  before=$(sha256sum <"$t/$name.db")
  o=$(k db import "$t/$name.db" "$t/b" 2>&1); rc=$?
  check "db import into the $name database: refused, exit 8 ($rc): $o" test $rc -eq 8
  check "... naming it" has "$o" "$t/$name.db"
  [ -n "$says" ] && check "... saying why: $says" has "$o" "$says"
  check "... and left as it was" test "$(sha256sum <"$t/$name.db")" = "$before"
  o=$(k report "$t/$name.db" 2>&1); rc=$?
  check "report of the $name database: exit 8 ($rc)" test $rc -eq 8
done

# --- 6. a schema 1 database migrated -----------------------------------------------------------------------------
python3 - "$t/v1.db" "$src" <<'PY'
import sqlite3, sys, hashlib
c = sqlite3.connect(sys.argv[1])
c.executescript("""
CREATE TABLE records(id INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, task TEXT NOT NULL, plugin TEXT NOT NULL,
  device TEXT NOT NULL, status TEXT NOT NULL, git_rev TEXT NOT NULL, finished_at TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE sets(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, imported_at TEXT NOT NULL);
CREATE TABLE set_files(set_id INTEGER NOT NULL REFERENCES sets(id), path TEXT NOT NULL,
  record_id INTEGER NOT NULL REFERENCES records(id), PRIMARY KEY(set_id, path));
PRAGMA user_version = 1;
""")
text = open(sys.argv[2], "rb").read().decode()
c.execute("insert into records values(1, ?, 'fixture_blobs', 'fixture', 'cpu', 'ok', 'x', 'y', ?)",
          (hashlib.sha256(text.encode()).hexdigest(), text))
c.execute("insert into sets values(1, 'old', 'then')")
c.execute("insert into set_files values(1, 'fixture_blobs/fixture__cpu.json', 1)")
c.commit()
PY
before=$(sha256sum <"$t/v1.db")
o=$(k report "$t/v1.db:set=old" 2>&1); rc=$?
check "a reader refuses a schema 1 database, saying what migrates it ($rc): $o" \
  test $rc -eq 8 -a -n "$(grep -F "khost db list $t/v1.db" <<<"$o")"
check "... and writes nothing to it" test "$(sha256sum <"$t/v1.db")" = "$before"
o=$(k db list "$t/v1.db" 2>&1); rc=$?
check "a schema 1 database opens ($rc): $o" test $rc -eq 0 -a -n "$(grep -F "old	1	then" <<<"$o")"
check "... migrated to schema 2" test "$(sql "$t/v1.db" "pragma user_version")" = 2
m=$(sql "$t/v1.db" "select machine from records where id = 1")
check "... its machine column filled from the record: '$m'" has "$m" "$cpu | "
o=$(k report "$t/v1.db:set=old" 2>&1); rc=$?
check "... and read ($rc)" test $rc -eq 0
finish test_db
