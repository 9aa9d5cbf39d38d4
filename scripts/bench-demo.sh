#!/usr/bin/env bash
# Measures what `cardhour demo` costs: CPU time (user + system, from
# /proc/PID/stat) as a share of one core, and resident memory (VmRSS at the
# end, VmHWM: the peak) of the demo process at --speed SPEED (default 60),
# over DURATION seconds of wall time (default 60) after WARMUP seconds
# (default 20), with a client polling the dashboard's main reads (held now,
# usage of the start's month by project and day) every 5 s as an open
# dashboard does.
#
#   scripts/bench-demo.sh [DURATION] [SPEED] [WARMUP]
#
# With RSS_EVERY=SECONDS it also prints, every SECONDS of the measured span, the
# wall time, VmRSS split into anonymous memory (the Go heap, SQLite's caches)
# and file pages (the executable's code and data as they are first touched),
# VmHWM and the samples ingested so far, to show whether the memory grows over
# a long run (RSS_EVERY=60 scripts/bench-demo.sh 3600).
#
# Targets: under 300 MB RSS, under 25 % of one core at --speed 60.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60}
SPEED=${2:-60}
WARMUP=${3:-20}
work=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" go build -trimpath -o "$work/cardhour" ./cmd/cardhour
"$work/cardhour" demo --addr 127.0.0.1:0 --speed "$SPEED" --state "$work/state" >"$work/out" 2>"$work/err" &
pid=$!
for _ in $(seq 100); do grep -q 'admin token' "$work/out" 2>/dev/null && break; sleep 0.2; done
url=$(sed -n 's|^cardhour demo: dashboard  \(http://[^/]*\)/ui/$|\1|p' "$work/out")
token=$(sed -n 's|^cardhour demo: admin token \(.*\)$|\1|p' "$work/out")
period=$(sed -n 's/^cardhour demo: simulated time starts [A-Za-z]* \([0-9]\{4\}-[0-9]\{2\}\).*/\1/p' "$work/out")
[ -n "$url" ] && [ -n "$token" ] && [ -n "$period" ] || { cat "$work/err" >&2; exit 1; }
poll() {
	while kill -0 "$pid" 2>/dev/null; do
		curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$url/api/v1/held" || true
		curl -fsS -o /dev/null -H "Authorization: Bearer $token" "$url/api/v1/usage?period=$period&group_by=project,day" || true
		sleep 5
	done
}
poll &
poller=$!
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
sleep "$WARMUP"
t0=$(ticks)
w0=$(date +%s.%N)
if [ -n "${RSS_EVERY:-}" ]; then
	printf '%8s %10s %10s %10s %10s %10s\n' "wall s" "RSS MB" "anon MB" "file MB" "peak MB" samples
	left=$DURATION
	while [ "$left" -gt 0 ]; do
		step=$((left < RSS_EVERY ? left : RSS_EVERY))
		sleep "$step"
		left=$((left - step))
		awk -v w="$((DURATION - left))" -v n="$(wc -l <"$work/state/samples.jsonl")" '
			/^VmRSS/ {r = $2} /^RssAnon/ {a = $2} /^RssFile/ {f = $2} /^VmHWM/ {h = $2}
			END {printf "%8d %10.1f %10.1f %10.1f %10.1f %10d\n", w, r / 1024, a / 1024, f / 1024, h / 1024, n}' "/proc/$pid/status"
	done
else
	sleep "$DURATION"
fi
t1=$(ticks)
w1=$(date +%s.%N)
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
kill "$poller" 2>/dev/null || true
samples=$(wc -l <"$work/state/samples.jsonl")
awk -v t0="$t0" -v t1="$t1" -v w0="$w0" -v w1="$w1" -v hz="$hz" -v rss="$rss" -v hwm="$hwm" -v speed="$SPEED" -v n="$samples" 'BEGIN {
	cpu = (t1 - t0) / hz; wall = w1 - w0
	printf "demo --speed %s: CPU %.2f s over %.1f s wall = %.1f %% of one core (budget 25 %%)\n", speed, cpu, wall, 100 * cpu / wall
	printf "demo --speed %s: RSS %.1f MB at the end, peak %.1f MB (budget 300 MB); %d samples ingested so far\n", speed, rss / 1024, hwm / 1024, n
}'
