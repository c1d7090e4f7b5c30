#!/usr/bin/env python3
"""check_outputs.py KIND FILE... — what khost wrote from hostile records, checked as its reader would take it.
Every file: valid UTF-8 with no control character but line break and tab. KIND md: no raw tag or link from the
payload, every table row has its header's cell count (pipes not escaped). KIND json: parses. KIND stderr: no
terminal escape. Prints one FAIL line per finding; exit 1 when any."""
import json
import re
import sys

kind, files = sys.argv[1], sys.argv[2:]
fails = []
for path in files:
    data = open(path, "rb").read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fails.append(f"{path}: not UTF-8 ({e})")
        continue
    bad = sorted({hex(ord(c)) for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) < 0xa0})
    if bad:
        fails.append(f"{path}: control characters {bad}")
    if kind == "md":
        # an unescaped "<" opening a tag or comment, or an unescaped "](" making a link
        for m in re.finditer(r"(?<!\\)<(script|img|svg|!--)|(?<!\\)\]\(javascript:", text):
            fails.append(f"{path}: raw {m.group(0)!r} from a record")
        cols = None
        for n, line in enumerate(text.split("\n"), 1):
            if not line.startswith("|"):
                cols = None
                continue
            cells = len(re.findall(r"(?<!\\)\|", line))
            if cols is None:
                cols = cells
            elif cells != cols:
                fails.append(f"{path}:{n}: {cells - 1} cells in a table of {cols - 1}: {line[:120]!r}")
        if "line\nbreak" in text:
            fails.append(f"{path}: a record's line break reached the text as a line break")
    elif kind == "json":
        try:
            json.loads(text)
        except ValueError as e:
            fails.append(f"{path}: not JSON: {e}")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
