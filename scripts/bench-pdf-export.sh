#!/usr/bin/env bash
# PDF export of one finalized invoice at RATE requests/s against a real
# `cardhour serve` on SQLite with the example samples, measured twice in the
# same run by scripts/api-load (open loop): first the baseline, every request
# rendering (--export-cache-mb 0), then with the export cache (the default).
# Prints both lines and the ratio of the p99s. Target: p99 < 50 ms at 200/s.
#
#   scripts/bench-pdf-export.sh [RATE] [DURATION] [BASELINE_DURATION]
#   (defaults: 200, 10s, 5s; the baseline overloads the cores, so it is shorter)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-200}
duration=${2:-10s}
baseline=${3:-5s}
dir=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT

go build -o "$dir/cardhour" ./cmd/cardhour
go build -o "$dir/api-load" ./scripts/api-load
db="sqlite://$dir/u.db"
"$dir/cardhour" ingest --store "$db" --from-file schemas/examples/samples.jsonl --listen '' >/dev/null
"$dir/cardhour" migrate --store "$db" >/dev/null 2>&1 || true
token=$("$dir/cardhour" token create --state "$db" --role finance 2>/dev/null)
port=${PORT:-18381}
base="http://127.0.0.1:$port/api/v1"

serve() { # serve EXTRA-FLAGS...: start serve and wait until it answers
	"$dir/cardhour" serve --store "$db" --catalog schemas/examples/catalog.yaml --addr "127.0.0.1:$port" --grace 1s "$@" \
		>"$dir/serve.out" 2>"$dir/serve.err" &
	pid=$!
	for _ in $(seq 300); do
		curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$base/me" 2>/dev/null && return 0
		sleep 0.1
	done
	cat "$dir/serve.err" >&2
	exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

# One finalized invoice: a billing run of November, the first draft finalized.
serve
curl -fsS -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
	-d '{"period":"2026-11"}' "$base/billing-runs" >"$dir/run.json"
read -r id sha < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["drafts"][0]; print(d["invoice_id"], d["sha256"])' "$dir/run.json")
curl -fsS -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
	-d "{\"if_sha256\":\"$sha\"}" "$base/invoices/$id/finalize"
url="$base/invoices/$id/export?format=pdf"
curl -fsS -o "$dir/invoice.pdf" -H "Authorization: Bearer $token" "$url"
echo "invoice $id: PDF of $(wc -c <"$dir/invoice.pdf") bytes"
stop

echo "== baseline: --export-cache-mb 0 (every request renders), $rate/s for $baseline"
serve --export-cache-mb 0
"$dir/api-load" --token "$token" --url "$url" --rate "$rate" --duration "$baseline" --warmup 5 | tee "$dir/base.txt" || true
stop

echo "== export cache (default), $rate/s for $duration"
serve
"$dir/api-load" --token "$token" --url "$url" --rate "$rate" --duration "$duration" | tee "$dir/cached.txt"
echo "== control: GET /api/v1/me (token lookup, no export) on the same server, $rate/s for $baseline"
"$dir/api-load" --token "$token" --url "$base/me" --rate "$rate" --duration "$baseline" || true
stop

python3 - "$dir/base.txt" "$dir/cached.txt" <<'PY'
import re, sys
def p99(path):
    # A request that failed (api-load's 10 s timeout) counts as at least 10 s:
    # with more than 1 % failed, the p99 is that lower bound.
    t = open(path).read()
    m = re.search(r"requests (\d+) .*errors (\d+), .*p99 ([0-9.]+) ms", t)
    if not m:
        return None, ""
    n, errs, p = int(m.group(1)), int(m.group(2)), float(m.group(3))
    return (10000.0, ">= ") if errs > n / 100 else (p, "")
(b, bq), (c, cq) = p99(sys.argv[1]), p99(sys.argv[2])
if b and c:
    print(f"p99 baseline {bq}{b:.1f} ms, cached {cq}{c:.1f} ms: {bq}{b / c:.0f}x (cached/baseline {c / b:.4f})")
PY
