#!/usr/bin/env bash
# Measures what the collector costs on a node: CPU time and peak RSS of
# `cardhour collect --simulate` sampling one simulated node at 1 Hz, for
# DURATION seconds (default 60), publishing to Kafka through the spool when
# KAFKA_BROKERS is set, else JSON Lines to /dev/null. The node (FLEET):
#
#   mig   8 A100 x 7 MIG 1g.10gb instances (56 instances; the default)
#   vgpu  a vGPU host: 4 A16 GPUs x 16 vGPUs of A16-1Q (64 vGPU instances, each
#         read through NVML's vGPU calls, one VM per vGPU)
#   hami  a HAMi node: 4 A100 x 20 shares of 4 GB and 5 % of the cores (80 shares,
#         per-process utilisation read through NVML, processes split per share)
#
# It measures the binary a GPU node runs: the collector-only build of
# cmd/cardhour (make build-collector: -tags collector,grpcnotrace). BUILD=full
# measures the all-in-one binary (make build) instead.
#
#   scripts/bench-collector.sh [DURATION]
#   deployments/testenv/with-services.sh scripts/bench-collector.sh 300
#   BUILD=full scripts/bench-collector.sh 300
#   FLEET=vgpu scripts/bench-collector.sh 300
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
	case "${FLEET:=mig}" in
	mig)
		what="56 MIG instances (8 A100 x 7 x 1g.10gb)"
		echo "    model: a100-80gb"
		echo "    gpus:"
		for _ in 1 2 3 4 5 6 7 8; do echo "      - mig: $mig"; done
		echo "holders:"
		for g in 0 1 2 3 4 5 6 7; do
			echo "  - {name: t$g, project: nlp-lab, user: u$g, instance: bench-node/$g/0, behaviour: training}"
			echo "  - {name: n$g, project: cv-lab, user: v$g, instance: bench-node/$g/1, behaviour: notebook, active_for: 10s}"
			echo "  - {name: j$g, project: ai101, user: w$g, instance: bench-node/$g/2, behaviour: jobs, job_every: 20s, job_length: 5s}"
		done
		;;
	vgpu | hami)
		if [[ $FLEET == vgpu ]]; then
			what="64 vGPU instances (4 A16 x 16 x A16-1Q), all held"
			echo "    model: a16-16gb"
			gpu="vgpu: {type: A16-1Q, count: 16}"
			per=16
		else
			what="80 HAMi shares (4 A100 x 20 x 4 GB, 5 % of the cores), all held"
			echo "    model: a100-80gb"
			gpu="shares: {kind: hami, count: 20, mem_mb: 4096, cores: 5}"
			per=20
		fi
		echo "    gpus:"
		for _ in 0 1 2 3; do echo "      - $gpu"; done
		echo "holders:"
		behaviours=("behaviour: training" "behaviour: notebook, active_for: 10s" "behaviour: jobs, job_every: 20s, job_length: 5s")
		for g in 0 1 2 3; do
			for ((s = 0; s < per; s++)); do
				echo "  - {name: h$g-$s, project: ai101, user: u$g$s, instance: bench-node/$g/$s, ${behaviours[$((s % 3))]}}"
			done
		done
		;;
	*)
		echo "FLEET=$FLEET: want mig, vgpu or hami" >&2
		exit 2
		;;
	esac
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
if ! kill -0 $pid 2>/dev/null; then
	echo "the collector exited at start:" >&2
	cat "$work/log" >&2
	exit 1
fi
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
echo "collector: $what at 1 Hz for ${DURATION}s, output: $where"
echo "binary: $binary"
echo "cpu: ${cpu_s}s of CPU in ${DURATION}s = ${pct}% of one core"
echo "rss: ${rss} kB now, ${hwm} kB peak (private ${anon} kB, file-backed pages of the binary ${file} kB)"
if grep -q '"level":"ERROR"' "$work/log"; then
	echo "errors in the collector log:" >&2
	grep '"level":"ERROR"' "$work/log" | head >&2
fi
