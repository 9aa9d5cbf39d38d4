"""Replay a plan of ClickHouse statements in process on chDB (current
ClickHouse) and compare every query's rows with those recorded on the test
server (ClickHouse 18.16).

    python chdb-replay.py PLAN.json      # run by scripts/chdb-replay.sh

The plan is JSON: {"steps": [{"kind": "exec"|"insert"|"query", "sql": ...,
"rows": [[...], ...], "compare": bool, "what": ...}, ...]}. Rows are compared
as multisets (GROUP BY answers have no order); numbers with a relative
tolerance of 1e-9, the rest as text. Exits 1 naming every statement that
failed or answered differently, 0 otherwise; prints the server version.
"""
import json
import math
import sys

import chdb
from chdb import session as chs


def norm(v):
    if v is None:
        return ("null",)
    if isinstance(v, bool):
        return ("num", float(v))
    if isinstance(v, (int, float)):
        return ("num", float(v))
    s = str(v)
    try:
        f = float(s)
        if not math.isnan(f):
            return ("num", f)
    except ValueError:
        pass
    return ("str", s)


def same(a, b):
    if a[0] == "num" and b[0] == "num":
        return a[1] == b[1] or abs(a[1] - b[1]) <= 1e-9 * max(abs(a[1]), abs(b[1]), 1.0)
    return a == b


def key(row):
    return [(c[0], round(c[1], 6) if c[0] == "num" else c[1]) if len(c) > 1 else c for c in row]


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    sess = chs.Session()
    sess.query("SET session_timezone = 'UTC'")
    version = sess.query("SELECT version()", "TabSeparated").bytes().decode().strip()
    print(f"chDB {chdb.__version__}: ClickHouse {version}")
    failures = []
    compared = 0
    for i, st in enumerate(plan["steps"], 1):
        sql, kind = st["sql"], st["kind"]
        where = f"step {i} ({kind}, {st.get('what') or 'setup'})"
        try:
            if kind == "query":
                res = sess.query(sql, "JSONCompact")
                got = json.loads(res.bytes().decode() or "{}").get("data", [])
            else:
                sess.query(sql)
                continue
        except Exception as e:  # chDB raises its own error types
            failures.append(f"{where}: {e}\n    {sql[:2000]}")
            continue
        if not st.get("compare"):
            continue
        compared += 1
        want = sorted(([norm(v) for v in r] for r in st.get("rows") or []), key=key)
        have = sorted(([norm(v) for v in r] for r in got), key=key)
        ok = len(want) == len(have) and all(
            len(w) == len(h) and all(same(x, y) for x, y in zip(w, h)) for w, h in zip(want, have))
        if not ok:
            failures.append(f"{where}: rows differ\n    {sql[:2000]}\n    18.16: {want[:5]}{' ...' if len(want) > 5 else ''} ({len(want)} rows)\n"
                            f"    {version}: {have[:5]}{' ...' if len(have) > 5 else ''} ({len(have)} rows)")
    steps = len(plan["steps"])
    if failures:
        print(f"{len(failures)} of {steps} statements failed or differ on ClickHouse {version}:", file=sys.stderr)
        for f in failures:
            print(f, file=sys.stderr)
        sys.exit(1)
    print(f"{steps} statements replayed on ClickHouse {version}, {compared} queries answered as on the test server")


if __name__ == "__main__":
    main()
