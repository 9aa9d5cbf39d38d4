#!/usr/bin/env bash
# The scale-out path at fleet scale (docs/benchmarks.md, docs/scale.md): a
# fleet's samples through the Kafka cluster and 1, 2 and 3 ingest workers into
# the ClickHouse cluster, against clickhouse-client loading the same rows as
# Native into the same cluster, then the month close from the cluster. Needs
# the testenv profiles chcluster and kcluster:
#   eval "$(bash deployments/testenv/services.sh up chcluster)"
#   eval "$(bash deployments/testenv/services.sh up kcluster)"
#   scripts/bench-fleet.sh
#
# INSTANCES (default 70 000: 10 000 GPUs x 7 MIG instances) sampled every
# INTERVAL seconds (default 10) for MINUTES simulated minutes (default 10:
# 4.2 M samples, 7 000 samples/s) are generated once (`cardhour generate`)
# and produced once, by the collector's Kafka sink (acks=all), to a fresh
# topic of PARTITIONS partitions (default 6) with 3 replicas: a backlog.
# Then, for W in WORKERS (default "1 2 3"), W `cardhour ingest` processes in a
# fresh group consume the whole topic into a fresh database on the cluster
# (?cluster=, shard-local quorum inserts; only the first worker computes the
# hourly sums). Per round: the seconds from the workers' start to the group's
# last offset committed, samples/s, each worker's CPU seconds and peak RSS
# (/proc: VmHWM), the group's lag sampled every second (largest, and the
# seconds until it is back to 0), each ClickHouse server's CPU seconds and
# the rows its active parts hold (all tables, and raw_samples_local) per
# second of the round. Then clickhouse-client loads the last round's raw rows,
# dumped as Native, into a fresh cluster database through the Distributed
# raw_samples (insert_distributed_sync=1; raw rows only, no rollups, no
# quorum), and `cardhour bill --store` closes the month from the last round's
# database BILLS times (default 3; the median). With PACED=1 a last round
# publishes the same samples at RATE samples/s (default INSTANCES/INTERVAL)
# to a fresh topic while PACED_WORKERS workers (default 1) consume it, and
# prints the lag over time: the fleet in real time, MINUTES wall minutes.
# The machine's cores are shared by the workers, the brokers, ZooKeeper and
# the ClickHouse servers: the figures are of that machine, not a site's hosts.
# A round not done within WAIT_S seconds (default 900) stops the script.
# BENCH_NAME (default benchfl) prefixes the topic, group and database names;
# every database and topic it creates is dropped at its end.
set -euo pipefail
cd "$(dirname "$0")/.."

INSTANCES=${INSTANCES:-70000}
INTERVAL=${INTERVAL:-10}
MINUTES=${MINUTES:-10}
WORKERS=${WORKERS:-"1 2 3"}
PARTITIONS=${PARTITIONS:-6}
WAIT_S=${WAIT_S:-900}
BILLS=${BILLS:-3}
PACED=${PACED:-0}
PACED_WORKERS=${PACED_WORKERS:-1}
RATE=${RATE:-$((INSTANCES / INTERVAL))}
NAME=${BENCH_NAME:-benchfl}
: "${CLICKHOUSE_CLUSTER_ADDRS:?run: eval \"\$(bash deployments/testenv/services.sh up chcluster)\"}"
: "${KAFKA_CLUSTER_BROKERS:?run: eval \"\$(bash deployments/testenv/services.sh up kcluster)\"}"
CLUSTER=${CLICKHOUSE_CLUSTER:-cardhour}
KAFKA=$KAFKA_CLUSTER_BROKERS
IFS=, read -r -a SERVERS <<<"$CLICKHOUSE_CLUSTER_ADDRS"
ENTRY=${SERVERS[0]}
TESTENV=${CARDHOUR_TESTENV_DIR:-${HOME:-/tmp}/.cache/cardhour-testenv}
N=$((INSTANCES * MINUTES * 60 / INTERVAL))
RUN=${NAME}_$$
WORK=$(mktemp -d)
DBS=()
cleanup() {
	local db
	for db in "${DBS[@]}"; do chq "$ENTRY" "DROP DATABASE IF EXISTS $db ON CLUSTER $CLUSTER" >/dev/null 2>&1 || true; done
	"$WORK/bench" deltopics --brokers "$KAFKA" "$RUN" "${RUN}_paced" "${RUN}_dlq" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=scripts/cluster-lib.sh
. scripts/cluster-lib.sh
TICK=$(getconf CLK_TCK)
cpu_s() { awk -v t="$TICK" '{print ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null || echo 0; }
hwm_mb() { awk '/^VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo 0; }
server_cpu() { # the CPU seconds of every ClickHouse server of the profile, space-separated
	local i out=""
	for i in $(seq 1 "${#SERVERS[@]}"); do
		out+="$(cpu_s "$(cat "$TESTENV/chcluster-ch$i.pid" 2>/dev/null || echo 0)") "
	done
	echo "$out"
}
newdb() { # newdb DB: migrate DB on the cluster, dropped at exit
	DBS+=("$1")
	"$WORK/cardhour" migrate --store "clickhouse://$ENTRY/$1" --cluster "$CLUSTER" >/dev/null 2>&1
}
per_server() { # per_server DB SECONDS CPU_BEFORE: rows of each server's active parts per second, and its CPU seconds
	local db=$1 s=$2 before=($3) after=($(server_cpu)) i a all raw
	for i in "${!SERVERS[@]}"; do
		a=${SERVERS[$i]}
		all=$(chq "$a" "SELECT sum(rows) FROM system.parts WHERE database = '$db' AND active")
		raw=$(chq "$a" "SELECT sum(rows) FROM system.parts WHERE database = '$db' AND active AND table = 'raw_samples_local'")
		printf '  server %d (%s): %d rows (%d raw) = %.0f rows/s (%.0f raw/s), CPU %.1f s\n' "$((i + 1))" "$a" "$all" "$raw" \
			"$(echo "$all / $s" | bc -l)" "$(echo "$raw / $s" | bc -l)" "$(echo "${after[$i]:-0} - ${before[$i]:-0}" | bc -l)"
	done
}
report() { cat "$WORK/r" >>"$WORK/rounds"; cat "$WORK/r" >&2; }
lagsum() { # lagsum FILE: the largest lag in messages, and when it was last above 0
	awk '{split($2, e, "="); split($4, l, "="); sub("t_s=", "", $1); if (l[2] + 0 > m) m = l[2] + 0; if (l[2] + 0 > 0) last = $1}
		END {printf "largest lag %d messages, last above 0 at %.0f s", m, last}' "$1"
}

export CGO_CFLAGS=${CGO_CFLAGS:-"-O2 -g -Wno-deprecated-declarations"}
go build -o "$WORK/cardhour" ./cmd/cardhour
go build -o "$WORK/bench" ./scripts/bench-ingest
"$WORK/cardhour" generate --samples "$N" --instances "$INSTANCES" --interval "$INTERVAL" --seed 1 --out "$WORK/s.jsonl" >&2
t0=$(now)
"$WORK/bench" produce --brokers "$KAFKA" --topic "$RUN" --partitions "$PARTITIONS" --replication-factor 3 "$WORK/s.jsonl"
t1=$(now)
printf 'produced %d samples (%d instances every %s s, %s simulated minutes) in %.1f s: %.0f samples/s\n' \
	"$N" "$INSTANCES" "$INTERVAL" "$MINUTES" "$(echo "$t1 - $t0" | bc -l)" "$(echo "$N / ($t1 - $t0)" | bc -l)"

# workers TOPIC GROUP DB W: start W workers into DB; their pids in PIDS.
workers() {
	local j sums
	PIDS=()
	for j in $(seq 1 "$4"); do
		sums=1m
		[[ $j == 1 ]] || sums=0
		"$WORK/cardhour" ingest --store "clickhouse://$ENTRY/$3?cluster=$CLUSTER" --brokers "$KAFKA" --topic "$1" \
			--group "$2" --dlq-topic "${RUN}_dlq" --sums-every "$sums" --listen "" --log-level warn &
		PIDS+=($!)
	done
}
# stop_workers: each worker's CPU seconds and peak RSS, then SIGTERM.
stop_workers() {
	local p
	for p in "${PIDS[@]}"; do
		printf '  worker pid %d: CPU %.1f s, peak RSS %d MB\n' "$p" "$(cpu_s "$p")" "$(hwm_mb "$p")"
	done
	kill -TERM "${PIDS[@]}"
	wait "${PIDS[@]}" || true
}

# consume W: one backlog round of W workers; appends its line to $WORK/rounds.
consume() {
	local w=$1 db=${RUN}_w$1 group=${RUN}_g$1 cpu0 lagpid out s rows
	newdb "$db"
	cpu0=$(server_cpu)
	workers "$RUN" "$group" "$db" "$w"
	"$WORK/bench" lag --brokers "$KAFKA" --topic "$RUN" --group "$group" --every 1s >"$WORK/lag$w" 2>/dev/null &
	lagpid=$!
	if ! out=$(timeout "$WAIT_S" "$WORK/bench" waitlag --brokers "$KAFKA" --topic "$RUN" --group "$group"); then
		kill "$lagpid" 2>/dev/null || true
		stop_workers
		echo "$w workers: the group did not commit the whole topic within ${WAIT_S}s; stopping" >&2
		exit 1
	fi
	kill "$lagpid" 2>/dev/null || true
	s=$(echo "$out" | sed -E 's/.*wall_s=([0-9.]+).*/\1/')
	{
		printf '%d worker(s): %.1f s, %.0f samples/s (%s; %s)\n' "$w" "$s" "$(echo "$N / $s" | bc -l)" "$out" "$(lagsum "$WORK/lag$w")"
		stop_workers
		per_server "$db" "$s" "$cpu0"
	} >"$WORK/r"
	report
	rows=$(chq "$ENTRY" "SELECT uniqExact(instance_id, start_ms) FROM $db.raw_samples")
	[[ $rows == "$N" ]] || echo "warning: $w workers stored $rows distinct samples of $N" | tee -a "$WORK/rounds" >&2
	LAST=$db
}

LAST=""
for w in $WORKERS; do
	[[ -z $LAST ]] || { chq "$ENTRY" "DROP DATABASE IF EXISTS $LAST ON CLUSTER $CLUSTER" >/dev/null; }
	consume "$w"
done

# The same raw rows as Native through the Distributed raw_samples (FINAL: each
# sample once, though a rebalance had some stored twice).
COLS="ts, start_ms, interval_ms, node, gpu_uuid, gpu_model, instance_id, profile, project, user, util, mem_used_bytes, mem_total_bytes, processes, util_source, holder_ref, share_kind, share_mem, share_cores, ingested_at"
chq "$ENTRY" "SELECT $COLS FROM $LAST.raw_samples FINAL FORMAT Native" >"$WORK/raw.native"
nat=${RUN}_nat
newdb "$nat"
cpu0=$(server_cpu)
t0=$(now)
chq "$ENTRY" "INSERT INTO $nat.raw_samples ($COLS) FORMAT Native" --insert_distributed_sync=1 <"$WORK/raw.native"
t1=$(now)
s=$(echo "$t1 - $t0" | bc -l)
{
	printf 'clickhouse-client Native -> cluster raw_samples (Distributed, sync): %.1f s, %.0f samples/s\n' "$s" "$(echo "$N / $s" | bc -l)"
	per_server "$nat" "$s" "$cpu0"
} >"$WORK/r"
report
chq "$ENTRY" "DROP DATABASE IF EXISTS $nat ON CLUSTER $CLUSTER" >/dev/null
rm -f "$WORK/raw.native"

# The month close of what the last round stored.
# The trace starts at 00:00 Asia/Shanghai, the example catalog's time zone.
period=$(TZ=Asia/Shanghai date -d "$(head -n 1 "$WORK/s.jsonl" | sed -E 's/.*"ts":"([^"]+)".*/\1/')" +%Y-%m)
for i in $(seq 1 "$BILLS"); do
	t0=$(now)
	"$WORK/cardhour" bill --catalog schemas/examples/catalog.yaml --store "clickhouse://$ENTRY/$LAST?cluster=$CLUSTER" \
		--period "$period" --format json >"$WORK/bill.json"
	t1=$(now)
	echo "$t1 - $t0" | bc -l >>"$WORK/bills"
done
printf 'month close (cardhour bill --store, %s, %d instances, %d samples), median of %d: %.2f s (%s)\n' "$period" "$INSTANCES" "$N" "$BILLS" \
	"$(median <"$WORK/bills")" "$(paste -sd' ' "$WORK/bills")" >"$WORK/r"
report
chq "$ENTRY" "DROP DATABASE IF EXISTS $LAST ON CLUSTER $CLUSTER" >/dev/null

if [[ $PACED == 1 ]]; then
	db=${RUN}_paced group=${RUN}_gpaced
	newdb "$db"
	"$WORK/bench" deltopics --brokers "$KAFKA" "${RUN}_paced" 2>/dev/null || true
	cpu0=$(server_cpu)
	t0=$(now)
	"$WORK/bench" produce --brokers "$KAFKA" --topic "${RUN}_paced" --partitions "$PARTITIONS" --replication-factor 3 --rate "$RATE" "$WORK/s.jsonl" &
	prod=$!
	sleep 2
	workers "${RUN}_paced" "$group" "$db" "$PACED_WORKERS"
	"$WORK/bench" lag --brokers "$KAFKA" --topic "${RUN}_paced" --group "$group" --every 1s >"$WORK/lagpaced" 2>/dev/null &
	lagpid=$!
	wait "$prod"
	t1=$(now)
	timeout "$WAIT_S" "$WORK/bench" waitlag --brokers "$KAFKA" --topic "${RUN}_paced" --group "$group" >"$WORK/paced.out"
	t2=$(now)
	kill "$lagpid" 2>/dev/null || true
	{
		printf 'paced: %d samples at %s samples/s, %d worker(s): published in %.0f s, the group done %.1f s after the last publish; %s\n' \
			"$N" "$RATE" "$PACED_WORKERS" "$(echo "$t1 - $t0" | bc -l)" "$(echo "$t2 - $t1" | bc -l)" "$(lagsum "$WORK/lagpaced")"
		awk 'NR % 30 == 0 {print "  " $0}' "$WORK/lagpaced"
		stop_workers
		per_server "$db" "$(echo "$t2 - $t0" | bc -l)" "$cpu0"
	} >"$WORK/r"
	report
fi

echo
echo "$N samples ($INSTANCES instances every $INTERVAL s, $MINUTES simulated minutes), $PARTITIONS partitions x 3 replicas," \
	"cluster $CLUSTER (${#SERVERS[@]} servers), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
cat "$WORK/rounds"
