#!/usr/bin/env bash
# Measures what the collector costs on a node: CPU time and peak RSS of
# `cardhour collect --simulate` sampling 8 GPUs x 7 MIG instances (56 instances)
# at 1 Hz, for DURATION seconds (default 60), publishing to Kafka through the
# spool when KAFKA_BROKERS is set, else JSON Lines to /dev/null.
#
# It measures the binary a GPU node runs: the collector-only build of
# cmd/cardhour (make build-collector: -tags collector,grpcnotrace). BUILD=full
# measures the all-in-one binary (make build) instead.
#
#   scripts/bench-collector.sh [DURATION]
#   deployments/testenv/with-services.sh scripts/bench-collector.sh 300
#   BUILD=full scripts/bench-collector.sh 300
#
# Budget (issue #3): under 1 % of one core, under 30 MB RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

case "${BUILD:=collector}" in
collector) tags=(-tags collector,grpcnotrace) ;;
full) tags=() ;;
*)
	echo "BUILD=$BUILD: want collector or full" >&2
	exit 2
	;;
esac
CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" go build -trimpath "${tags[@]}" -o "$work/cardhour" ./cmd/cardhour
binary="$BUILD build${tags:+ (${tags[*]})}, $(awk -v b="$(stat -c %s "$work/cardhour")" 'BEGIN {printf "%.1f MB", b / 1e6}')"

mig='[1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]'
{
	echo "nodes:"
	echo "  - name: bench-node"
	echo "    model: a100-80gb"
	echo "    gpus:"
	for _ in 1 2 3 4 5 6 7 8; do echo "      - mig: $mig"; done
	echo "holders:"
	for g in 0 1 2 3 4 5 6 7; do
		echo "  - {name: t$g, project: nlp-lab, user: u$g, instance: bench-node/$g/0, behaviour: training}"
		echo "  - {name: n$g, project: cv-lab, user: v$g, instance: bench-node/$g/1, behaviour: notebook, active_for: 10s}"
		echo "  - {name: j$g, project: ai101, user: w$g, instance: bench-node/$g/2, behaviour: jobs, job_every: 20s, job_length: 5s}"
	done
} >"$work/fleet.yaml"

if [[ -n "${KAFKA_BROKERS:-}" ]]; then
	out=(--output kafka --brokers "$KAFKA_BROKERS" --topic "cardhour_bench_collector_$$" --spool-dir "$work/spool")
	where="Kafka $KAFKA_BROKERS via the spool"
else
	out=(--output stdout)
	where="JSON Lines to /dev/null (set KAFKA_BROKERS to include Kafka)"
fi

"$work/cardhour" collect --simulate "$work/fleet.yaml" --interval 1s --listen "" --log-level warn "${out[@]}" >/dev/null 2>"$work/log" &
pid=$!
sleep 3 # start-up (NVML mock, first connection) is not steady state
ticks=$(getconf CLK_TCK)
read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
sleep "$DURATION"
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
anon=$(awk '/RssAnon/ {print $2}' /proc/$pid/status)
file=$(awk '/RssFile/ {print $2}' /proc/$pid/status)
kill -INT $pid
wait $pid || true

cpu_s=$(awk -v a=$((u1 + s1 - u0 - s0)) -v t="$ticks" 'BEGIN {printf "%.2f", a / t}')
pct=$(awk -v c="$cpu_s" -v d="$DURATION" 'BEGIN {printf "%.3f", 100 * c / d}')
echo "collector: 56 instances at 1 Hz for ${DURATION}s, output: $where"
echo "binary: $binary"
echo "cpu: ${cpu_s}s of CPU in ${DURATION}s = ${pct}% of one core"
echo "rss: ${rss} kB now, ${hwm} kB peak (private ${anon} kB, file-backed pages of the binary ${file} kB)"
if grep -q '"level":"ERROR"' "$work/log"; then
	echo "errors in the collector log:" >&2
	grep '"level":"ERROR"' "$work/log" | head >&2
fi
