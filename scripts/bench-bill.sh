#!/usr/bin/env bash
# Benchmark `cardhour bill` on generated traces of N samples, against loading the
# same file into ClickHouse (INSERT … FORMAT JSONEachRow) plus a GROUP BY project,
# user — measured in the same run, on the same machine, printed as a ratio.
#
#   scripts/bench-bill.sh                 # 1 M and 20 M samples
#   scripts/bench-bill.sh 1000000         # just 1 M
#
# Needs clickhouse-client and a ClickHouse server: CLICKHOUSE_ADDR (host:port of the
# native protocol) if set, else the project's test server (deployments/testenv).
# Generated files are kept in $BENCH_DIR (default /tmp/cardhour-bench) for reruns;
# 20 M samples take about 7.6 GB.
set -euo pipefail
cd "$(dirname "$0")/.."

sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1000000 20000000)
dir=${BENCH_DIR:-/tmp/cardhour-bench}
mkdir -p "$dir"

export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
go build -trimpath -o bin/cardhour ./cmd/cardhour
bin=$PWD/bin/cardhour


if [[ -z ${CLICKHOUSE_ADDR:-} ]]; then
	eval "$(bash deployments/testenv/services.sh up 2>/dev/null | grep CLICKHOUSE)"
fi
ch_host=${CLICKHOUSE_ADDR%:*}
ch_port=${CLICKHOUSE_ADDR##*:}
ch() { clickhouse-client --host "$ch_host" --port "$ch_port" "$@"; }
db=cardhour_bench_$$
ch -q "CREATE DATABASE IF NOT EXISTS $db"
trap 'ch -q "DROP DATABASE IF EXISTS $db" || true' EXIT

now() { date +%s.%N; }
fmt() { awk -v x="$1" 'BEGIN{printf "%.2f", x}'; }

echo "cardhour bench-bill: $(nproc) cores, $(go version | cut -d' ' -f3), ClickHouse $(ch -q 'SELECT version()')"
printf '\n%-11s %10s %12s %13s %10s %12s %12s %8s\n' samples "file MB" "bill s" "samples/s" "peak MB" "CH load s" "CH total s" "CH/bill"
for n in "${sizes[@]}"; do
	f=$dir/samples-$n.jsonl
	if [[ ! -s $f ]]; then
		"$bin" generate --samples "$n" --seed 1 --out "$f.tmp" 2>/dev/null
		mv "$f.tmp" "$f"
	fi
	mb=$(($(stat -c %s "$f") / 1048576))
	# Warm the page cache for both contenders alike.
	cat "$f" >/dev/null

	t0=$(now)
	/usr/bin/time -f '%M' -o "$dir/rss" "$bin" bill --catalog schemas/examples/catalog.yaml \
		--samples "$f" --period 2026-11 --format json >"$dir/invoice-$n.json" 2>/dev/null
	t1=$(now)
	bill_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')
	peak_mb=$(($(cat "$dir/rss") / 1024))

	ch -q "DROP TABLE IF EXISTS $db.samples"
	ch -q "CREATE TABLE $db.samples (ts DateTime, interval_s Float64, node String, gpu_uuid String,
		gpu_model String, instance_id String, profile String, project String, user String,
		util Nullable(Float64), mem_used_bytes UInt64, mem_total_bytes UInt64, processes UInt32)
		ENGINE = MergeTree PARTITION BY toYYYYMM(ts) ORDER BY (project, user, ts)"
	t2=$(now)
	ch --date_time_input_format=best_effort --input_format_skip_unknown_fields=1 \
		-q "INSERT INTO $db.samples FORMAT JSONEachRow" <"$f"
	t3=$(now)
	ch -q "SELECT project, user, count(), sum(interval_s) FROM $db.samples WHERE project != ''
		GROUP BY project, user FORMAT Null"
	t4=$(now)
	load_s=$(awk -v a="$t2" -v b="$t3" 'BEGIN{print b-a}')
	ch_s=$(awk -v a="$t2" -v b="$t4" 'BEGIN{print b-a}')
	rate=$(awk -v n="$n" -v s="$bill_s" 'BEGIN{printf "%.0f", n/s}')
	ratio=$(awk -v c="$ch_s" -v b="$bill_s" 'BEGIN{printf "%.2f", c/b}')
	printf '%-11s %10s %12s %13s %10s %12s %12s %8s\n' "$n" "$mb" "$(fmt "$bill_s")" "$rate" "$peak_mb" \
		"$(fmt "$load_s")" "$(fmt "$ch_s")" "$ratio"
done
echo
echo "targets: >= 1000000 samples/s, peak < 256 MB at 20 M, CH/bill >= 2.00"
