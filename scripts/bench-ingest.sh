#!/usr/bin/env bash
# Ingest benchmarks (docs/operations.md, "Benchmarks"). Needs the test services:
#   eval "$(bash deployments/testenv/services.sh up)"; scripts/bench-ingest.sh
#
# 1. End-to-end throughput: N samples (default 2 000 000) Kafka → cardhour ingest
#    → ClickHouse (raw rows + occupancy + idle runs), against loading the same
#    rows with clickhouse-client (TSV) into the same raw_samples table. Both in
#    this run, on this machine; ratio = direct seconds / ingest seconds (≥ 1:
#    ingest is at least as fast as the bulk loader).
# 2. Month close: 7 000 MIG instances at a 300 s interval (a whole month is
#    ~62.5 M samples). SCALES lists the fractions of a month actually loaded
#    (default 0.0625 and 0.125); `cardhour bill --store clickhouse://…` is timed
#    at each, with its peak memory, and extrapolated linearly to a full month.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-2000000}
SCALES=${SCALES:-"0.0625 0.125"}
CH=${CLICKHOUSE_ADDR:-127.0.0.1:19000}
KAFKA=${KAFKA_BROKERS:-127.0.0.1:19092}
CH_HOST=${CH%:*}
CH_PORT=${CH##*:}
RUN=bench_$(date +%s)_$$
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
chq() { clickhouse-client --host "$CH_HOST" --port "$CH_PORT" --query "$1"; }
now() { date +%s.%N; }

echo "== building" >&2
go build -o "$WORK/cardhour" ./cmd/cardhour
go build -o "$WORK/bench" ./scripts/bench-ingest

echo "== generating $N samples (7000 instances, 300 s)" >&2
"$WORK/cardhour" generate --samples "$N" --instances 7000 --interval 300 --seed 1 --out "$WORK/s.jsonl"
"$WORK/bench" tsv "$WORK/s.jsonl" >"$WORK/s.tsv"

COLS="ts, start_ms, interval_ms, node, gpu_uuid, gpu_model, instance_id, profile, project, user, util, mem_used_bytes, mem_total_bytes, processes, util_source, ingested_at"
"$WORK/cardhour" migrate --clickhouse "$CH" --database "${RUN}_direct" >/dev/null 2>&1
"$WORK/cardhour" migrate --clickhouse "$CH" --database "${RUN}_ingest" >/dev/null 2>&1

echo "== direct load with clickhouse-client (TSV)" >&2
t0=$(now)
chq "INSERT INTO ${RUN}_direct.raw_samples ($COLS) FORMAT TabSeparated" <"$WORK/s.tsv"
t1=$(now)
direct=$(echo "$t1 - $t0" | bc -l)
direct_rows=$(chq "SELECT count() FROM ${RUN}_direct.raw_samples")

echo "== Kafka → ingest → ClickHouse" >&2
"$WORK/bench" produce --brokers "$KAFKA" --topic "$RUN" --partitions 4 "$WORK/s.jsonl"
"$WORK/cardhour" ingest --store "clickhouse://$CH/${RUN}_ingest" --brokers "$KAFKA" --topic "$RUN" \
	--group "${RUN}_g" --dlq-topic "${RUN}_dlq" --consumers 2 --batch-size 100000 --batch-age 1s \
	--listen "" --log-level warn &
pid=$!
lag=$("$WORK/bench" waitlag --brokers "$KAFKA" --topic "$RUN" --group "${RUN}_g")
kill -TERM "$pid"
wait "$pid" || true
ingest_s=$(echo "$lag" | sed -E 's/.*wall_s=([0-9.]+).*/\1/')
first_s=$(echo "$lag" | sed -E 's/.*first_commit_s=([0-9.]+).*/\1/')
ingest_rows=$(chq "SELECT count() FROM ${RUN}_ingest.raw_samples")
occ_rows=$(chq "SELECT count() FROM ${RUN}_ingest.occupancy")
idle_rows=$(chq "SELECT count() FROM ${RUN}_ingest.idle_runs")

printf '\n%-48s %12s %10s %14s\n' "end-to-end, $N samples" "seconds" "rows" "samples/s"
printf '%-48s %12.2f %10s %14.0f\n' "clickhouse-client TSV → raw_samples" "$direct" "$direct_rows" "$(echo "$N / $direct" | bc -l)"
printf '%-48s %12.2f %10s %14.0f\n' "Kafka → cardhour ingest → ClickHouse (all tables)" "$ingest_s" "$ingest_rows" "$(echo "$N / $ingest_s" | bc -l)"
printf '%-48s %12.2f\n' "  of which group join until the first commit" "$first_s"
printf '%-48s %12s\n' "  occupancy rows / idle-run rows written" "$occ_rows / $idle_rows"
printf '%-48s %12.2f\n' "ratio (direct s / ingest s, target >= 1.0)" "$(echo "$direct / $ingest_s" | bc -l)"

echo
printf '%-10s %12s %12s %12s %12s %12s\n' "month" "samples" "fill_s" "bill_s" "bill_MiB" "occ_rows"
full=$((7000 * 8928))
for scale in $SCALES; do
	db="${RUN}_month_${scale/./_}"
	ns=$(printf '%.0f' "$(echo "$full * $scale" | bc -l)")
	fill=$("$WORK/bench" fill --store "clickhouse://$CH/$db" --instances 7000 --interval 300 --samples "$ns" --start 2026-11 | sed -E 's/.* in (.*)/\1/')
	/usr/bin/time -f '%e %M' -o "$WORK/time" "$WORK/cardhour" bill --store "clickhouse://$CH/$db" \
		--catalog schemas/examples/catalog.yaml --period 2026-11 >"$WORK/inv.json" 2>/dev/null
	read -r bill_s rss_kb <"$WORK/time"
	occ=$(chq "SELECT count() FROM $db.occupancy")
	printf '%-10s %12s %12s %12s %12.0f %12s\n' "$scale" "$ns" "$fill" "$bill_s" "$(echo "$rss_kb / 1024" | bc -l)" "$occ"
	last_scale=$scale
	last_bill=$bill_s
	chq "DROP DATABASE IF EXISTS $db"
done
printf 'linear extrapolation to a full month (62.5 M samples): bill ≈ %.1f s\n' "$(echo "$last_bill / $last_scale" | bc -l)"

chq "DROP DATABASE IF EXISTS ${RUN}_direct"
chq "DROP DATABASE IF EXISTS ${RUN}_ingest"
