#!/usr/bin/env bash
# Ingest throughput through 1, 2 and 3 workers on a Kafka cluster
# (docs/scale.md, docs/benchmarks.md). Needs ClickHouse and the testenv
# profile kcluster (three brokers, replication factor 3, min.insync.replicas 2):
#   eval "$(bash deployments/testenv/services.sh up clickhouse)"
#   eval "$(bash deployments/testenv/services.sh up kcluster)"
#   scripts/bench-kcluster.sh
#
# N samples (default 600 000: 7 000 instances at 300 s, `cardhour generate`)
# are produced once, by the collector's Kafka sink (acks=all), to a fresh
# topic of PARTITIONS partitions (default 6) with 3 replicas. Then, REPEAT
# times (default 3), for W in WORKERS (default "1 2 3"), in turn: W
# `cardhour ingest` processes (one consumer each) in a fresh group consume the
# whole topic into a fresh ClickHouse database; the time is from their start
# to the group's last offset committed (group join included). Medians are
# printed, in seconds and samples per second, with each W's ratio of samples
# per second to 1 worker's, measured in the same run. On a machine of few
# cores the workers share them with ClickHouse and the three brokers: the
# ratios say how far more workers help there, not on a site's hosts.
# A round whose group has not committed the whole topic within WAIT_S seconds
# (default 300) stops the script with what was stored.
# BENCH_NAME (default benchkc) prefixes the topic, group and database names.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-600000}
REPEAT=${REPEAT:-3}
WORKERS=${WORKERS:-"1 2 3"}
PARTITIONS=${PARTITIONS:-6}
WAIT_S=${WAIT_S:-300}
NAME=${BENCH_NAME:-benchkc}
: "${CLICKHOUSE_ADDR:?run: eval \"\$(bash deployments/testenv/services.sh up clickhouse)\"}"
: "${KAFKA_CLUSTER_BROKERS:?run: eval \"\$(bash deployments/testenv/services.sh up kcluster)\"}"
CH=$CLICKHOUSE_ADDR
KAFKA=$KAFKA_CLUSTER_BROKERS
RUN=${NAME}_$$
WORK=$(mktemp -d)
trap '"$WORK/bench" deltopics --brokers "$KAFKA" "$RUN" "${RUN}_dlq" 2>/dev/null || true; rm -rf "$WORK"' EXIT

chq() { clickhouse-client --host "${CH%:*}" --port "${CH##*:}" -q "$1"; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

go build -o "$WORK/cardhour" ./cmd/cardhour
go build -o "$WORK/bench" ./scripts/bench-ingest
"$WORK/cardhour" generate --samples "$N" --instances 7000 --interval 300 --seed 1 --out "$WORK/s.jsonl" >&2
"$WORK/bench" produce --brokers "$KAFKA" --topic "$RUN" --partitions "$PARTITIONS" --replication-factor 3 "$WORK/s.jsonl"

# consume W I: W workers in group RUN_gWwI; appends the seconds to $WORK/W.s.
consume() {
	local w=$1 i=$2 db=${RUN}_w$1r$2 pids=() lag j
	"$WORK/cardhour" migrate --store "clickhouse://$CH/$db" >/dev/null 2>&1
	for j in $(seq 1 "$w"); do
		"$WORK/cardhour" ingest --store "clickhouse://$CH/$db" --brokers "$KAFKA" --topic "$RUN" \
			--group "${RUN}_g${w}r$i" --dlq-topic "${RUN}_dlq" --listen "" --log-level warn &
		pids+=($!)
	done
	if ! lag=$(timeout "$WAIT_S" "$WORK/bench" waitlag --brokers "$KAFKA" --topic "$RUN" --group "${RUN}_g${w}r$i"); then
		kill -TERM "${pids[@]}"
		wait "${pids[@]}" || true
		echo "round $i: $w workers: the group's committed offsets did not reach the end of the topic within ${WAIT_S}s" \
			"($(chq "SELECT uniqExact(instance_id, start_ms, project, user) FROM $db.raw_samples") of $N distinct samples stored); stopping" >&2
		chq "DROP DATABASE $db"
		exit 1
	fi
	kill -TERM "${pids[@]}"
	wait "${pids[@]}" || true
	echo "$lag" | sed -E 's/.*wall_s=([0-9.]+).*/\1/' >>"$WORK/$w.s"
	local rows
	rows=$(chq "SELECT count() FROM (SELECT DISTINCT instance_id, start_ms, project, user FROM $db.raw_samples)")
	[[ $rows == "$N" ]] || echo "warning: $w workers stored $rows distinct samples of $N" >&2
	chq "DROP DATABASE $db"
	echo "round $i: $w workers $(tail -n1 "$WORK/$w.s") s" >&2
}

for i in $(seq 1 "$REPEAT"); do
	for w in $WORKERS; do consume "$w" "$i"; done
done

echo "$N samples, $PARTITIONS partitions x 3 replicas, median of $REPEAT, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
base=""
for w in $WORKERS; do
	s=$(median <"$WORK/$w.s")
	rate=$(echo "$N / $s" | bc -l)
	[[ -n $base ]] || base=$rate
	printf '%-40s %8.2f s %10.0f samples/s  ratio %.2f\n' "$w worker(s), one consumer each" "$s" "$rate" "$(echo "$rate / $base" | bc -l)"
done
