#!/usr/bin/env bash
# Fuzz the whole HTTP API from its own OpenAPI document with schemathesis:
# a real `cardhour serve` on a SQLite store seeded with the example usage,
# with an admin token (every operation) and a student token (the operations
# a student may call); every check, none excluded (no 5xx; statuses, content
# types, headers and bodies as the document says; every request the document
# allows accepted and every one it forbids rejected; authentication and
# object-level authorization), in every phase, the stateful one included: it
# follows the document's links (billing run -> invoice -> finalize -> void ->
# finalize the reissue draft), once over the invoice lifecycle's operations
# with the billing run's period fixed to the samples' month
# (scripts/api-fuzz-stateful.toml) and once over every operation with the
# period free. Fails on any finding, and unless the lifecycle pass had 2xx
# billing runs, finalizes, voids and finalizes of reissue drafts, at least
# API_FUZZ_LIFECYCLE_LEAST (3) of each (counted from the server log and
# printed).
#
#   scripts/api-fuzz.sh                      short budget (make test)
#   API_FUZZ_MAX_EXAMPLES=500 scripts/api-fuzz.sh   longer (make api-fuzz API_FUZZ_MAX_EXAMPLES=500)
#
# schemathesis is installed from PyPI into a virtual environment under the
# test cache. Without python3 (with venv) or PyPI the run is skipped with a
# notice, except under CI=true, where that fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

SCHEMATHESIS_VERSION=4.32.5
MAX_EXAMPLES=${API_FUZZ_MAX_EXAMPLES:-5}
# The stateful phase needs more: a scenario reaches void -> finalize only
# after a billing run of a month with drafts, its finalize and its void.
# (The lifecycle pass bills the four months before this one, which are over:
# a draft is finalizable from its month's end, plus serve's --grace 1s.)
STATEFUL_EXAMPLES=${API_FUZZ_STATEFUL_EXAMPLES:-$((MAX_EXAMPLES * 8))}
# The lifecycle pass fails with fewer 2xx than this at any step of the chain.
LIFECYCLE_LEAST=${API_FUZZ_LIFECYCLE_LEAST:-3}
CACHE=${CARDHOUR_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cardhour-testenv}
VENV=$CACHE/schemathesis-$SCHEMATHESIS_VERSION
GO=${GO:-go}

ci() { case "${CI:-}" in true|1|yes) return 0;; esac; return 1; }
skip() {
	if ci; then
		echo "api-fuzz: $1 (CI=true: failing)" >&2
		exit 1
	fi
	echo "api-fuzz: SKIPPED: $1 (set CI=true to make this an error)" >&2
	exit 0
}

if [ ! -f "$VENV/.installed" ]; then
	command -v python3 >/dev/null || skip "python3 not found"
	rm -rf "$VENV"
	python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; skip "python3 cannot make a virtual environment (Debian: apt-get install python3-venv)"; }
	"$VENV/bin/pip" install -q "schemathesis==$SCHEMATHESIS_VERSION" >&2 || { rm -rf "$VENV"; skip "pip could not install schemathesis==$SCHEMATHESIS_VERSION"; }
	touch "$VENV/.installed"
fi

work=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	# API_FUZZ_LOG=FILE keeps the server's log (every request with its status).
	if [ -n "${API_FUZZ_LOG:-}" ] && [ -f "$work/serve.log" ]; then cp "$work/serve.log" "$API_FUZZ_LOG"; fi
	rm -rf "$work"
}
trap cleanup EXIT

$GO build -o "$work/cardhour" ./cmd/cardhour
store="sqlite://$work/usage.db"
"$work/cardhour" ingest --store "$store" --from-file schemas/examples/samples.jsonl --listen "" >/dev/null 2>&1
# The samples' November again in the four months before this one (days
# after the 28th on the 28th): months that are over, with drafts for the
# lifecycle pass to finalize, void and reissue whatever today is (with one
# month it runs out of drafts: every invoice finalized, its scenario over).
# Their list becomes the pass's dictionary of billing-run periods.
months=$(python3 - schemas/examples/samples.jsonl "$work" <<'PY'
import datetime, json, sys
src, work = sys.argv[1], sys.argv[2]
now = datetime.datetime.now(datetime.timezone.utc)
months = []
for k in range(1, 5):
    y, m = divmod(now.year * 12 + now.month - 1 - k, 12)
    months.append(f"{y:04d}-{m + 1:02d}")
for month in months:
    if month == "2026-11":
        continue  # the samples themselves
    with open(src) as f, open(f"{work}/samples-{month}.jsonl", "w") as out:
        for line in f:
            sample = json.loads(line)
            if sample["ts"].startswith("2026-11-"):
                day = min(int(sample["ts"][8:10]), 28)
                sample["ts"] = f"{month}-{day:02d}" + sample["ts"][10:]
                out.write(json.dumps(sample) + "\n")
print(" ".join(months))
PY
)
for month in $months; do
	[ -f "$work/samples-$month.jsonl" ] || continue
	"$work/cardhour" ingest --store "$store" --from-file "$work/samples-$month.jsonl" --listen "" >/dev/null 2>&1
done
admin=$("$work/cardhour" token create --state "$store" --role admin --name api-fuzz) ||
	{ echo "api-fuzz: token create failed" >&2; exit 1; }
"$work/cardhour" serve --store "$store" --catalog schemas/examples/catalog.yaml --addr 127.0.0.1:0 --grace 1s \
	>"$work/serve.out" 2>"$work/serve.log" &
pid=$!
for _ in $(seq 100); do
	grep -q "listening on" "$work/serve.out" 2>/dev/null && break
	kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; echo "api-fuzz: serve did not start" >&2; exit 1; }
	sleep 0.1
done
addr=$(sed -n 's/.*listening on //p' "$work/serve.out")
[ -n "$addr" ] || { cat "$work/serve.log" >&2; echo "api-fuzz: serve did not start" >&2; exit 1; }
# A student of nlp-lab with usage in the example samples; made through the API
# once serve has stored the catalog (a student's project must be in it).
student=$(curl -fsS -X POST -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
	-d '{"role":"student","project":"nlp-lab","user":"2023110042","name":"api-fuzz-student"}' \
	"http://$addr/api/v1/tokens" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])') ||
	{ cat "$work/serve.log" >&2; echo "api-fuzz: the student token could not be made" >&2; exit 1; }
# Data to find: a billing run of November makes drafts to read and export
# in every pass (finalizable once November is over, with --grace 1s; the
# lifecycle pass makes its own from the months ingested above).
curl -fsS -X POST -H "Authorization: Bearer $admin" -H 'Content-Type: application/json' \
	-d '{"period":"2026-11"}' "http://$addr/api/v1/billing-runs" >/dev/null 2>&1 || true

echo "api-fuzz: schemathesis $SCHEMATHESIS_VERSION against http://$addr, $MAX_EXAMPLES examples per operation" >&2
status=0
# (from the work folder: schemathesis keeps a cache folder where it runs)
# One worker: with threads, hypothesis (describing its filter lambdas) once
# crashed inside CPython's AST constructor ("recursion depth mismatch").
fuzz() {
	local token=$1 config=$2
	shift 2
	echo "== schemathesis $*" >>"$work/report.txt"
	(cd "$work" && "$VENV/bin/schemathesis" --config-file "$config" run "http://$addr/api/v1/openapi.json" \
		--header "Authorization: Bearer $token" \
		--checks all --max-examples "$MAX_EXAMPLES" --workers 1 \
		--request-timeout 10 --seed 1 --no-color "$@" >>"$work/report.txt" 2>&1) || status=$?
}
# The operations a role may call, from the document's x-cardhour-roles.
ops_for() {
	"$VENV/bin/python" - "$work/openapi.json" "$1" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for item in doc["paths"].values():
    for op in item.values():
        if isinstance(op, dict) and sys.argv[2] in op.get("x-cardhour-roles", []):
            print("--include-operation-id=" + op["operationId"])
PY
}
curl -fsS "http://$addr/api/v1/openapi.json" >"$work/openapi.json"
mapfile -t student_ops < <(ops_for student)
config=$root/scripts/api-fuzz.toml
# The lifecycle pass: api-fuzz.toml with api-fuzz-stateful.toml, which draws
# the billing run's period from the dictionary "months" (see there): the
# months with usage ingested above.
{
	cat "$config" "$root/scripts/api-fuzz-stateful.toml"
	printf '\n[dictionaries.months]\nvalues = [%s]\n' "$(printf '"%s", ' $months | sed 's/, $//')"
} >"$work/lifecycle.toml"
lifecycle_ops=(create-billing-run get-invoice finalize-invoice void-invoice export-invoice list-credit-notes)
# Admin: every operation, in four passes. Token revocation last and alone,
# because a generated id can be the fuzzing token's own, after which every
# other operation would only see 401. The stateful phase twice: over the
# invoice lifecycle's operations alone, steered to a month with drafts (the
# server log of this pass is counted below), then over every operation with
# the period free.
# Operations only a student may call (an exemption request) are fuzzed in the
# student's pass below: to every other token they answer 403 only.
mapfile -t student_only < <("$VENV/bin/python" - "$work/openapi.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for item in doc["paths"].values():
    for op in item.values():
        if isinstance(op, dict) and op.get("x-cardhour-roles") == ["student"]:
            print("--exclude-operation-id=" + op["operationId"])
PY
)
fuzz "$admin" "$config" --phases examples,coverage,fuzzing --exclude-operation-id revoke-token "${student_only[@]}"
lifecycle_from=$(($(wc -l <"$work/serve.log") + 1))
fuzz "$admin" "$work/lifecycle.toml" --phases stateful --max-examples "$STATEFUL_EXAMPLES" \
	"${lifecycle_ops[@]/#/--include-operation-id=}"
tail -n "+$lifecycle_from" "$work/serve.log" >"$work/lifecycle.log"
# The lifecycle pass must have walked every link of the chain with a 2xx,
# at least LIFECYCLE_LEAST times each:
# from the server log, the statuses of its billing runs and of its POST
# .../finalize and .../void per invoice; a finalized invoice of revision 2 or
# more is a reissue draft a void opened (its revision read back from the API).
# Counted at once, before the revocation pass can revoke the admin token.
lifecycle_rc=0
"$VENV/bin/python" - "$work/lifecycle.log" "http://$addr" "$admin" "$LIFECYCLE_LEAST" <<'PY' >"$work/lifecycle.txt" 2>&1 || lifecycle_rc=$?
import collections, json, re, sys, urllib.request
log, base, token, least = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
status = collections.defaultdict(collections.Counter)
finalized = set()
for line in open(log, encoding="utf-8", errors="replace"):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("msg") != "request" or r.get("method") != "POST":
        continue
    m = re.fullmatch(r"/api/v1/invoices/([0-9]+)/(finalize|void)", r.get("path", ""))
    step = m.group(2) if m else ("billing-run" if r.get("path") == "/api/v1/billing-runs" else None)
    if step is None:
        continue
    ok = 200 <= r["status"] < 300
    status[step]["2xx" if ok else str(r["status"])] += 1
    if ok and step == "finalize":
        finalized.add(int(m.group(1)))
reissues = 0
for id in sorted(finalized):
    req = urllib.request.Request(f"{base}/api/v1/invoices/{id}", headers={"Authorization": "Bearer " + token})
    if json.load(urllib.request.urlopen(req, timeout=10))["revision"] > 1:
        reissues += 1
counts = {"billing-run": status["billing-run"]["2xx"], "finalize": status["finalize"]["2xx"],
          "void": status["void"]["2xx"], "reissue-finalize": reissues}
for step in ("billing-run", "finalize", "void"):
    print(f"api-fuzz: lifecycle pass: POST {step}: " + ", ".join(f"{k} {v}" for k, v in sorted(status[step].items())))
print("api-fuzz: lifecycle pass 2xx: " + ", ".join(f"{k} {v}" for k, v in counts.items())
      + f" (finalized invoices {len(finalized)}, of them reissue drafts {reissues})")
missing = [k for k, v in counts.items() if v < least]
if missing:
    print(f"api-fuzz: the lifecycle pass succeeded fewer than {least} times at: " + ", ".join(missing)
          + " (the chain billing run -> finalize -> void -> finalize the reissue draft was not fuzzed)")
    sys.exit(1)
PY
fuzz "$admin" "$config" --phases stateful --exclude-operation-id revoke-token --max-examples "$STATEFUL_EXAMPLES" "${student_only[@]}"
# Student: what a student may call (the rest is 403, checked in api/roles_test.go).
fuzz "$student" "$config" --phases examples,coverage,fuzzing "${student_ops[@]}"
fuzz "$admin" "$config" --phases examples,coverage,fuzzing --include-operation-id revoke-token
cat "$work/report.txt" "$work/lifecycle.txt" >&2
[ "$lifecycle_rc" = 0 ] || status=1
if grep -q "Authentication failed" "$work/report.txt"; then
	echo "api-fuzz: some operations saw only 401/403: the fuzzing token did not reach them" >&2
	status=1
fi
if grep -q '"level":"ERROR"' "$work/serve.log"; then
	echo "api-fuzz: the server logged errors:" >&2
	grep '"level":"ERROR"' "$work/serve.log" | head -20 >&2
	status=1
fi
exit $status
