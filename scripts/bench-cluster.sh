#!/usr/bin/env bash
# Back-fill into a ClickHouse cluster against one server (docs/scale.md,
# docs/benchmarks.md). Needs the single server and the cluster profile:
#   eval "$(bash deployments/testenv/services.sh up clickhouse)"
#   eval "$(bash deployments/testenv/services.sh up chcluster)"
#   scripts/bench-cluster.sh
#
# The example fleet (collector/testdata/fleet.example.yaml) is simulated once
# for DAYS days (default 30: 1.25 M samples) into one file. Then, REPEAT times
# (default 3), in turn, each into a fresh database:
#   - `cardhour ingest --from-file` into one server (CLICKHOUSE_ADDR);
#   - the same into the cluster (CLICKHOUSE_CLUSTER_ADDRS, ?cluster=
#     CLICKHOUSE_CLUSTER): shard-local quorum inserts;
#   - clickhouse-client loads the same raw rows, as Native (dumped once from
#     the first cluster database), into the cluster's raw_samples through its
#     Distributed table with insert_distributed_sync=1, without quorum
#     (ClickHouse applies one insert_quorum to every shard of a Distributed
#     insert, which a one-replica shard never meets).
# The loads write raw_samples only; ingest writes raw_samples and its
# rollups. Medians are printed, in seconds and samples per second, with the
# ratios cluster ingest / one-server ingest and Native / cluster ingest.
# BENCH_NAME (default benchclu) prefixes the database names.
set -euo pipefail
cd "$(dirname "$0")/.."

DAYS=${DAYS:-30}
REPEAT=${REPEAT:-3}
NAME=${BENCH_NAME:-benchclu}
: "${CLICKHOUSE_ADDR:?run: eval \"\$(bash deployments/testenv/services.sh up clickhouse)\"}"
: "${CLICKHOUSE_CLUSTER_ADDRS:?run: eval \"\$(bash deployments/testenv/services.sh up chcluster)\"}"
CLUSTER=${CLICKHOUSE_CLUSTER:-cardhour}
ONE=$CLICKHOUSE_ADDR
ENTRY=${CLICKHOUSE_CLUSTER_ADDRS%%,*}
WORK=$(mktemp -d)
BIN=$WORK/cardhour
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=scripts/cluster-lib.sh
. scripts/cluster-lib.sh

go build -o "$BIN" ./cmd/cardhour
from=2026-11-01T00:00:00+08:00
to=$(date -u -d "2026-10-31T16:00:00Z + $DAYS days" +%Y-%m-%dT%H:%M:%SZ)
"$BIN" simulate --fleet collector/testdata/fleet.example.yaml --from "$from" --to "$to" --out "$WORK/samples.jsonl"
N=$(wc -l <"$WORK/samples.jsonl")
COLS="ts, start_ms, interval_ms, node, gpu_uuid, gpu_model, instance_id, profile, project, user, util, mem_used_bytes, mem_total_bytes, processes, util_source, holder_ref, share_kind, share_mem, share_cores, ingested_at"

backfill() { # backfill DSN: seconds of one back-fill of the file
	local t0 t1
	t0=$(now)
	"$BIN" ingest --store "$1" --from-file "$WORK/samples.jsonl" --listen "" --log-level warn >/dev/null
	t1=$(now)
	echo "$t1 - $t0" | bc -l
}

one=() clu=() nat=()
for i in $(seq 1 "$REPEAT"); do
	db=${NAME}_one$i
	"$BIN" migrate --store "clickhouse://$ONE/$db" >/dev/null 2>&1
	one+=("$(backfill "clickhouse://$ONE/$db")")
	chq "$ONE" "DROP DATABASE IF EXISTS $db"

	db=${NAME}_clu$i
	"$BIN" migrate --store "clickhouse://$ENTRY/$db" --cluster "$CLUSTER" >/dev/null 2>&1
	clu+=("$(backfill "clickhouse://$ENTRY/$db?cluster=$CLUSTER")")
	if [[ ! -s $WORK/raw.native ]]; then
		chq "$ENTRY" "SELECT $COLS FROM $db.raw_samples FORMAT Native" >"$WORK/raw.native"
	fi
	chq "$ENTRY" "DROP DATABASE IF EXISTS $db ON CLUSTER $CLUSTER" >/dev/null

	db=${NAME}_nat$i
	"$BIN" migrate --store "clickhouse://$ENTRY/$db" --cluster "$CLUSTER" >/dev/null 2>&1
	t0=$(now)
	chq "$ENTRY" "INSERT INTO $db.raw_samples ($COLS) FORMAT Native" --insert_distributed_sync=1 <"$WORK/raw.native"
	t1=$(now)
	nat+=("$(echo "$t1 - $t0" | bc -l)")
	rows=$(chq "$ENTRY" "SELECT count() FROM $db.raw_samples")
	[[ $rows == "$N" ]] || echo "warning: the Native load stored $rows rows of $N" >&2
	chq "$ENTRY" "DROP DATABASE IF EXISTS $db ON CLUSTER $CLUSTER" >/dev/null
	echo "round $i: one server ${one[-1]} s, cluster ${clu[-1]} s, Native into the cluster ${nat[-1]} s" >&2
done

o=$(printf '%s\n' "${one[@]}" | median)
c=$(printf '%s\n' "${clu[@]}" | median)
n=$(printf '%s\n' "${nat[@]}" | median)
echo "$N samples ($DAYS days of the example fleet), median of $REPEAT, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-62s %8.2f s %10.0f samples/s\n' "cardhour ingest --from-file, one server" "$o" "$(echo "$N / $o" | bc -l)"
printf '%-62s %8.2f s %10.0f samples/s\n' "cardhour ingest --from-file, cluster (quorum 2 on shard 1)" "$c" "$(echo "$N / $c" | bc -l)"
printf '%-62s %8.2f s %10.0f samples/s\n' "clickhouse-client Native -> cluster raw_samples (Distributed, sync)" "$n" "$(echo "$N / $n" | bc -l)"
printf '%-62s %8.2f\n' "ratio one-server s / cluster s" "$(echo "$o / $c" | bc -l)"
printf '%-62s %8.2f\n' "ratio Native s / cluster ingest s" "$(echo "$n / $c" | bc -l)"
