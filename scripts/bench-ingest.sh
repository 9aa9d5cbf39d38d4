#!/usr/bin/env bash
# Ingest benchmarks (docs/operations.md, "Benchmarks"). Needs the test services:
#   eval "$(bash deployments/testenv/services.sh up)"; scripts/bench-ingest.sh
#
# 1. End-to-end throughput (PARTS contains e2e): N samples (default 2 000 000:
#    7 000 instances at 300 s) are produced once to a fresh topic. Then, REPEAT
#    times (default 3), in turn:
#      - clickhouse-client loads the same rows into a fresh raw_samples table,
#        from a pre-made TSV file and from two pre-made Native files: one with
#        the rows in the order they arrive (the order the pipeline gets them
#        in, and the target's baseline) and one in the table's sort order
#        (which spares the server most of its sort);
#      - `cardhour ingest` consumes the whole topic with a fresh consumer group
#        into a fresh database: raw_samples (the same rows) plus the occupancy
#        and idle_spans rollups, committing offsets after each stored batch.
#    The ingest time is from start to the last offset committed (group join
#    included). Medians are reported; ratio = direct seconds / ingest seconds
#    (>= 1: the pipeline is at least as fast as the bulk loader). When the
#    services are the ones deployments/testenv started, the CPU seconds that
#    clickhouse-server, the Kafka broker and the loader (clickhouse-client or
#    cardhour ingest) used in each run are printed too (read from
#    /proc/PID/stat before and after each load, for the TSV load, the Native
#    load and the pipeline), with the ratio of the Native load's CPU (server and
#    client) to the pipeline's (server, broker and ingest): on a small machine
#    they share the cores, and these say which one the run waited for.
# 2. Framing (PARTS contains framing): the consumer's CPU for the same samples
#    as one message per sample and as one message per node and tick.
# 3. Month close (PARTS contains month): 7 000 MIG instances at a 300 s interval
#    (a whole month is 62.5 M samples). SCALES lists the fractions of a month
#    loaded (default "0.0625 0.125"; "1" is the real full month, ~62.5 M rows).
#    `cardhour bill --store clickhouse://…` is timed REPEAT times at each, with
#    its peak memory. MONTH_DB=name reuses (and keeps) a database filled before
#    with `bench-ingest fill` instead of filling one (SCALES is then its label).
#    CATALOG (default schemas/examples/catalog.yaml) is the catalog billed with.
# 4. Replays (PARTS contains replay): a month of REPLAY_INSTANCES (default 7000)
#    instances at 300 s written three times into one running writer
#    (`bench-ingest replay`): rows kept and month close after one pass and after
#    three, and their ratios. REPLAY_STORE (default: SQLite in a temporary
#    directory) is the store DSN. Not in the default PARTS: it takes minutes.
# BASE_BIN=path: a second `cardhour` binary (e.g. built from an older commit)
# whose pipeline runs in the same invocation, against the same topic, after the
# same direct loads: in each repeat both pipelines run, in alternating order
# (A B, B A, …), and the paired ratio base s / this tree's s is printed too.
# Each pipeline's peak anonymous and file-backed RSS (RssAnon, RssFile of
# /proc/PID/status, sampled every 50 ms) is printed next to VmHWM.
# BENCH_NAME (default bench) prefixes the topic, group and database names, so
# that concurrent invocations (other worktrees) never share them.
# STORE_PARAMS (default empty) is appended to the ingest store URL, e.g.
# "?compress=none" for a ClickHouse on the same host (docs/operations.md).
# The topic is filled by the collector's own Kafka sink (zstd), with messages
# framed as the collector frames them (one per node and tick).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-2000000}
SCALES=${SCALES:-"0.0625 0.125"}
PARTS=${PARTS:-"e2e month"}
REPEAT=${REPEAT:-3}
PARTITIONS=${PARTITIONS:-4}
CATALOG=${CATALOG:-schemas/examples/catalog.yaml}
# One consumer: a batch's insert ends while the next streams, and a second
# consumer in the group costs the server a second insert stream (and, on
# the test broker, a rebalance that consumes some messages twice).
INGEST_FLAGS=${INGEST_FLAGS:-"--consumers 1 --batch-size 500000"}
STORE_PARAMS=${STORE_PARAMS:-}
CH=${CLICKHOUSE_ADDR:-127.0.0.1:19000}
KAFKA=${KAFKA_BROKERS:-127.0.0.1:19092}
CH_HOST=${CH%:*}
CH_PORT=${CH##*:}
RUN=${BENCH_NAME:-bench}_$(date +%s)_$$
WORK=$(mktemp -d)
cleanup() {
	for db in $(chq "SHOW DATABASES" 2>/dev/null | grep "^${RUN}_" || true); do chq "DROP DATABASE IF EXISTS $db" || true; done
	[[ -x $WORK/bench ]] && "$WORK/bench" deltopics --brokers "$KAFKA" "$RUN" "${RUN}_dlq" >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
chq() { clickhouse-client --host "$CH_HOST" --port "$CH_PORT" --query "$1"; }
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# CPU seconds (user+system) a process has used; its children that were waited
# for are included. Empty when the process is unknown.
cpu_s() { [[ -n ${1:-} && -r /proc/$1/stat ]] && awk -v t="$(getconf CLK_TCK)" '{printf "%.2f", ($14+$15+$16+$17)/t}' "/proc/$1/stat"; }
state=${CARDHOUR_TESTENV_DIR:-${HOME:-/tmp}/.cache/cardhour-testenv}
CH_PID=$(cat "$state/clickhouse.pid" 2>/dev/null || true)
KAFKA_PID=$(cat "$state/kafka.pid" 2>/dev/null || true)
# usage: cpu_begin; …; cpu_end LABEL → appends "LABEL server kafka" deltas to $WORK/cpu
cpu_begin() { c0=$(cpu_s "$CH_PID"); k0=$(cpu_s "$KAFKA_PID"); }
cpu_end() {
	local c1 k1
	c1=$(cpu_s "$CH_PID")
	k1=$(cpu_s "$KAFKA_PID")
	if [[ -n $c0 && -n $c1 && -n $k0 && -n $k1 ]]; then
		echo "$1 $(echo "$c1 - $c0" | bc -l) $(echo "$k1 - $k0" | bc -l) $2" >>"$WORK/cpu"
	fi
}

# peak_rss PID FILE: until PID exits, samples its RssAnon and RssFile every
# 50 ms and keeps the highest of each (kB) in FILE ("anon file").
peak_rss() {
	local ma=0 mf=0 k v
	while [[ -r /proc/$1/status ]]; do
		while read -r k v _; do
			case $k in
			RssAnon:) ((v > ma)) && ma=$v ;;
			RssFile:) ((v > mf)) && mf=$v ;;
			esac
		done <"/proc/$1/status" 2>/dev/null || true
		echo "$ma $mf" >"$2"
		sleep 0.05
	done
}
# pipeline BIN LABEL I: BIN ingest consumes the whole topic with a fresh group
# into a fresh database; appends its time, rows, peak RSS and CPU to $WORK/LABEL.*.
pipeline() {
	local bin=$1 l=$2 i=$3 db=${RUN}_$2$3 pid sampler lag
	"$bin" migrate --store "clickhouse://$CH/$db" >/dev/null 2>&1
	cpu_begin
	# shellcheck disable=SC2086 # INGEST_FLAGS is a list of flags
	"$bin" ingest --store "clickhouse://$CH/$db$STORE_PARAMS" --brokers "$KAFKA" --topic "$RUN" \
		--group "${RUN}_g$l$i" --dlq-topic "${RUN}_dlq" $INGEST_FLAGS --listen "" --log-level warn &
	pid=$!
	peak_rss "$pid" "$WORK/peak.$pid" &
	sampler=$!
	lag=$("$WORK/bench" waitlag --brokers "$KAFKA" --topic "$RUN" --group "${RUN}_g$l$i")
	cpu_end "$l" "$(cpu_s "$pid")"
	awk '/^VmHWM/ {print $2 / 1024}' "/proc/$pid/status" >>"$WORK/$l.rss"
	kill -TERM "$pid"
	wait "$pid" || true
	wait "$sampler" || true
	awk '{printf "%.0f\n", $1 / 1024}' "$WORK/peak.$pid" >>"$WORK/$l.anon"
	awk '{printf "%.0f\n", $2 / 1024}' "$WORK/peak.$pid" >>"$WORK/$l.file"
	echo "$lag" | sed -E 's/.*wall_s=([0-9.]+).*/\1/' >>"$WORK/$l.s"
	echo "$lag" | sed -E 's/.*first_commit_s=([0-9.]+).*/\1/' >>"$WORK/$l.join"
	chq "SELECT count() FROM $db.raw_samples" >>"$WORK/$l.rows"
	occ_rows=$(chq "SELECT count() FROM $db.occupancy")
	idle_rows=$(chq "SELECT count() FROM $db.idle_spans")
	chq "DROP DATABASE $db"
}

# load LABEL DB FORMAT FILE: clickhouse-client inserts FILE into DB.raw_samples;
# appends the seconds to $WORK/LABEL.s and the CPU to $WORK/cpu.
load() {
	cpu_begin
	local t0
	t0=$(now)
	/usr/bin/time -f '%U %S' -o "$WORK/client.cpu" clickhouse-client --host "$CH_HOST" --port "$CH_PORT" \
		--query "INSERT INTO $2.raw_samples ($COLS) FORMAT $3" <"$4"
	echo "$(now) - $t0" | bc -l >>"$WORK/$1.s"
	cpu_end "$1" "$(awk '{print $1 + $2}' "$WORK/client.cpu")"
}

echo "== building" >&2
go build -o "$WORK/cardhour" ./cmd/cardhour
go build -o "$WORK/bench" ./scripts/bench-ingest
COLS="ts, start_ms, interval_ms, node, gpu_uuid, gpu_model, instance_id, profile, project, user, util, mem_used_bytes, mem_total_bytes, processes, util_source, ingested_at"

if [[ " $PARTS " == *" e2e "* ]]; then
	echo "== generating $N samples (7000 instances, 300 s)" >&2
	"$WORK/cardhour" generate --samples "$N" --instances 7000 --interval 300 --seed 1 --out "$WORK/s.jsonl" >&2
	"$WORK/bench" tsv "$WORK/s.jsonl" >"$WORK/s.tsv"
	"$WORK/bench" produce --brokers "$KAFKA" --topic "$RUN" --partitions "$PARTITIONS" "$WORK/s.jsonl"
	: >"$WORK/tsv.s"
	: >"$WORK/native.s"
	: >"$WORK/sorted.s"
	labels="ingest"
	[[ -n ${BASE_BIN:-} ]] && labels="ingest base"
	for l in $labels; do : >"$WORK/$l.s" >"$WORK/$l.join" >"$WORK/$l.rss" >"$WORK/$l.anon" >"$WORK/$l.file" >"$WORK/$l.rows"; done
	for i in $(seq "$REPEAT"); do
		"$WORK/cardhour" migrate --store "clickhouse://$CH/${RUN}_direct$i" >/dev/null 2>&1

		load tsv "${RUN}_direct$i" TabSeparated "$WORK/s.tsv"
		if [[ ! -s $WORK/s.native ]]; then
			# The same rows as Native, in the order they arrive (a Log table
			# keeps the order of its inserts) and in the table's order.
			chq "CREATE TABLE ${RUN}_direct$i.arrival ENGINE = Log AS SELECT $COLS FROM ${RUN}_direct$i.raw_samples WHERE 0"
			clickhouse-client --host "$CH_HOST" --port "$CH_PORT" \
				--query "INSERT INTO ${RUN}_direct$i.arrival ($COLS) FORMAT TabSeparated" <"$WORK/s.tsv"
			chq "SELECT $COLS FROM ${RUN}_direct$i.arrival SETTINGS max_threads = 1 FORMAT Native" >"$WORK/s.native"
			chq "SELECT $COLS FROM ${RUN}_direct$i.raw_samples FORMAT Native" >"$WORK/s.sorted.native"
		fi
		for o in native sorted; do
			f=$WORK/s.native
			[[ $o == sorted ]] && f=$WORK/s.sorted.native
			"$WORK/cardhour" migrate --store "clickhouse://$CH/${RUN}_$o$i" >/dev/null 2>&1
			load "$o" "${RUN}_$o$i" Native "$f"
			chq "DROP DATABASE ${RUN}_$o$i"
		done
		direct_rows=$(chq "SELECT count() FROM ${RUN}_direct$i.raw_samples")
		chq "DROP DATABASE ${RUN}_direct$i"

		order=$labels
		((i % 2 == 0)) && [[ -n ${BASE_BIN:-} ]] && order="base ingest"
		for l in $order; do
			bin=$WORK/cardhour
			[[ $l == base ]] && bin=$BASE_BIN
			pipeline "$bin" "$l" "$i"
		done
		line=$(printf 'run %d: tsv %.2f s, native %.2f s, native in table order %.2f s' "$i" "$(tail -1 "$WORK/tsv.s")" "$(tail -1 "$WORK/native.s")" "$(tail -1 "$WORK/sorted.s")")
		for l in $labels; do
			line+=$(printf ', %s %.2f s (first commit %.2f s, %s rows)' "$l" "$(tail -1 "$WORK/$l.s")" "$(tail -1 "$WORK/$l.join")" "$(tail -1 "$WORK/$l.rows")")
		done
		echo "$line" >&2
	done
	tsv=$(median <"$WORK/tsv.s")
	native=$(median <"$WORK/native.s")
	sorted=$(median <"$WORK/sorted.s")
	printf '\n%-58s %10s %10s %12s\n' "end-to-end, $N samples, median of $REPEAT" "seconds" "rows" "samples/s"
	printf '%-58s %10.2f %10s %12.0f\n' "clickhouse-client TSV → raw_samples" "$tsv" "$direct_rows" "$(echo "$N / $tsv" | bc -l)"
	printf '%-58s %10.2f %10s %12.0f\n' "clickhouse-client Native → raw_samples (arrival order)" "$native" "$direct_rows" "$(echo "$N / $native" | bc -l)"
	printf '%-58s %10.2f %10s %12.0f\n' "clickhouse-client Native → raw_samples (table order)" "$sorted" "$direct_rows" "$(echo "$N / $sorted" | bc -l)"
	for l in $labels; do
		ingest_s=$(median <"$WORK/$l.s")
		what="Kafka → cardhour ingest → raw_samples + rollups"
		[[ $l == base ]] && what="the same with BASE_BIN"
		printf '%-58s %10.2f %10s %12.0f\n' "$what" "$ingest_s" "$(median <"$WORK/$l.rows")" "$(echo "$N / $ingest_s" | bc -l)"
		printf '%-58s %10.2f\n' "  of which until the first commit (join + first batch)" "$(median <"$WORK/$l.join")"
		printf '%-58s %10.0f\n' "  peak RSS of the ingest process, MiB (VmHWM)" "$(median <"$WORK/$l.rss")"
		printf '%-58s %10s\n' "  peak anonymous / file-backed RSS, MiB" "$(median <"$WORK/$l.anon") / $(median <"$WORK/$l.file")"
		printf '%-58s %10.2f\n' "  ratio TSV s / ingest s" "$(echo "$tsv / $ingest_s" | bc -l)"
		printf '%-58s %10.2f\n' "  ratio Native (arrival order) s / ingest s (target >= 1.0)" "$(echo "$native / $ingest_s" | bc -l)"
		printf '%-58s %10.2f\n' "  ratio Native (table order) s / ingest s" "$(echo "$sorted / $ingest_s" | bc -l)"
	done
	for l in $labels; do
		# Each run's loads ran back to back: their ratio is less noisy than
		# the ratio of the medians on a machine whose speed drifts.
		printf '%-58s %10.2f\n' "paired ratio Native (arrival order) s / $l s per run, median" \
			"$(paste "$WORK/native.s" "$WORK/$l.s" | awk '{print $1 / $2}' | median)"
	done
	printf '%-58s %10s\n' "  rollup rows also written (last run): occupancy / idle_spans" "$occ_rows / $idle_rows"
	if [[ -n ${BASE_BIN:-} ]]; then
		printf '%-58s %10.2f\n' "paired ratio BASE_BIN s / this tree's s, median" \
			"$(paste "$WORK/base.s" "$WORK/ingest.s" | awk '{print $1 / $2}' | median)"
	fi
	if [[ -s $WORK/cpu ]]; then
		printf '\n%-58s %10s %10s %10s\n' "CPU seconds per run, median (machine: $(nproc) cores)" "server" "kafka" "loader"
		for what in tsv native sorted $labels; do
			printf '%-58s %10.2f %10.2f %10.2f\n' "  $what" \
				"$(awk -v w=$what '$1 == w {print $2}' "$WORK/cpu" | median)" \
				"$(awk -v w=$what '$1 == w {print $3}' "$WORK/cpu" | median)" \
				"$(awk -v w=$what '$1 == w {print $4}' "$WORK/cpu" | median)"
		done
		# CPU of the whole load, server included: the Native load's (server +
		# clickhouse-client) over the pipeline's (server + broker + ingest).
		for l in $labels; do
			printf '%-58s %10.2f\n' "ratio CPU s: Native load (server + client) / $l pipeline (server + kafka + ingest)" \
				"$(echo "$(awk '$1 == "native" {print $2 + $4}' "$WORK/cpu" | median) / $(awk -v w="$l" '$1 == w {print $2 + $3 + $4}' "$WORK/cpu" | median)" | bc -l)"
		done
	fi
	printf 'ingest flags: %s; store parameters: %s; topic partitions: %s; load average at the end: %s; all runs: tsv [%s] native [%s] sorted [%s]' "$INGEST_FLAGS" "${STORE_PARAMS:-none}" "$PARTITIONS" \
		"$(cut -d' ' -f1-3 /proc/loadavg)" "$(paste -sd' ' "$WORK/tsv.s")" "$(paste -sd' ' "$WORK/native.s")" "$(paste -sd' ' "$WORK/sorted.s")"
	for l in $labels; do printf ' %s [%s]' "$l" "$(paste -sd' ' "$WORK/$l.s")"; done
	echo
fi

if [[ " $PARTS " == *" framing "* ]]; then
	# What one message per node and tick saves the consumer: the same N samples
	# as N messages of one sample (keyed by instance) and as messages of one
	# node-tick each; each topic is read REPEAT times by a fresh consumer group
	# with kafka-go's Reader, without and with decoding every line.
	[[ -s $WORK/s.jsonl ]] || "$WORK/cardhour" generate --samples "$N" --instances 7000 --interval 300 --seed 1 --out "$WORK/s.jsonl" >&2
	"$WORK/bench" produce --brokers "$KAFKA" --topic "${RUN}_node" --partitions "$PARTITIONS" "$WORK/s.jsonl"
	"$WORK/bench" produce --brokers "$KAFKA" --topic "${RUN}_sample" --partitions "$PARTITIONS" --per-sample "$WORK/s.jsonl"
	echo
	printf '%-58s %10s %10s %12s\n' "reading $N samples (Reader.FetchMessage), median of $REPEAT" "messages" "CPU s" "+decode CPU s"
	for framing in sample node; do
		: >"$WORK/read.s"
		: >"$WORK/decode.s"
		for i in $(seq "$REPEAT"); do
			out=$("$WORK/bench" readcost --brokers "$KAFKA" --topic "${RUN}_$framing" --group "${RUN}_r${framing}$i" --samples "$N")
			echo "$out" | sed -E 's/.*cpu_s=([0-9.]+).*/\1/' >>"$WORK/read.s"
			msgs=$(echo "$out" | sed -E 's/.*messages=([0-9]+).*/\1/')
			"$WORK/bench" readcost --brokers "$KAFKA" --topic "${RUN}_$framing" --group "${RUN}_d${framing}$i" --samples "$N" --decode |
				sed -E 's/.*cpu_s=([0-9.]+).*/\1/' >>"$WORK/decode.s"
		done
		printf '%-58s %10s %10.2f %12.2f\n' "  one message per $framing" "$msgs" "$(median <"$WORK/read.s")" "$(median <"$WORK/decode.s")"
	done
	"$WORK/bench" deltopics --brokers "$KAFKA" "${RUN}_node" "${RUN}_sample" >/dev/null 2>&1 || true
fi

if [[ " $PARTS " == *" month "* ]]; then
	echo
	printf '%-8s %11s %9s %9s %9s %11s %11s\n' "month" "samples" "fill_s" "bill_s" "bill_MiB" "occ_rows" "idle_rows"
	full=$((7000 * 8928))
	for scale in $SCALES; do
		ns=$(printf '%.0f' "$(echo "$full * $scale" | bc -l)")
		if [[ -n ${MONTH_DB:-} ]]; then
			db=$MONTH_DB
			fill="(reused)"
			ns=$(chq "SELECT count() FROM $db.raw_samples")
		else
			db="${RUN}_month_${scale/./_}"
			fill=$("$WORK/bench" fill --store "clickhouse://$CH/$db" --instances 7000 --interval 300 --samples "$ns" --start 2026-11 | sed -E 's/.* in (.*)/\1/')
		fi
		: >"$WORK/bill.s"
		: >"$WORK/bill.kb"
		for i in $(seq "$REPEAT"); do
			/usr/bin/time -f '%e %M' -o "$WORK/time" "$WORK/cardhour" bill --store "clickhouse://$CH/$db" \
				--catalog "$CATALOG" --period 2026-11 >"$WORK/inv.json"
			read -r bill_s rss_kb <"$WORK/time"
			echo "$bill_s" >>"$WORK/bill.s"
			echo "$rss_kb" >>"$WORK/bill.kb"
		done
		occ=$(chq "SELECT count() FROM $db.occupancy")
		idle=$(chq "SELECT count() FROM $db.idle_spans")
		printf '%-8s %11s %9s %9.2f %9.0f %11s %11s   (bill runs: %s)\n' "$scale" "$ns" "$fill" "$(median <"$WORK/bill.s")" \
			"$(echo "$(sort -g "$WORK/bill.kb" | tail -1) / 1024" | bc -l)" "$occ" "$idle" "$(paste -sd' ' "$WORK/bill.s")"
		[[ -n ${MONTH_DB:-} ]] || chq "DROP DATABASE IF EXISTS $db"
	done
fi

if [[ " $PARTS " == *" replay "* ]]; then
	echo
	"$WORK/bench" replay --instances "${REPLAY_INSTANCES:-7000}" --store "${REPLAY_STORE:-}" --repeat "$REPEAT" --catalog "$CATALOG"
fi
