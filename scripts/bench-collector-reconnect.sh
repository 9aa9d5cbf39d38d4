#!/usr/bin/env bash
# Measures how soon a collector started while Kafka is unreachable delivers once
# Kafka is back: the collector build runs with its bootstrap address pointing
# at a port nobody listens on; after WAIT seconds (default 8) a forwarder to
# the real broker starts listening there, and the script prints the time from
# then to the collector's first acknowledged write (its log line "Kafka writes
# succeed again"). Repeats RUNS times (default 3). Needs KAFKA_BROKERS (one
# broker; the shared test broker is never stopped).
#
#   KAFKA_BROKERS=127.0.0.1:19092 scripts/bench-collector-reconnect.sh [RUNS] [WAIT]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
WAIT=${2:-8}
broker=${KAFKA_BROKERS:?set KAFKA_BROKERS to the broker (host:port)}
broker=${broker%%,*}
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations" go build -trimpath -tags collector,grpcnotrace -o "$work/cardhour" ./cmd/cardhour
go build -o "$work/tcpforward" ./scripts/tcpforward
cat >"$work/fleet.yaml" <<'YAML'
nodes:
  - name: reconnect-node
    model: a100-80gb
    gpus:
      - mig: [1g.10gb, 1g.10gb]
holders: []
YAML

for run in $(seq 1 "$RUNS"); do
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	rm -rf "$work/spool"
	"$work/cardhour" collect --simulate "$work/fleet.yaml" --interval 1s --listen "" --log-level info --kafka-linger 0s \
		--brokers "127.0.0.1:$port" --topic "cardhour_bench_reconnect_$$" --spool-dir "$work/spool" >/dev/null 2>"$work/log" &
	collector=$!
	pids+=("$collector")
	sleep "$WAIT"
	"$work/tcpforward" "127.0.0.1:$port" "$broker" >"$work/fwd" &
	pids+=($!)
	for _ in $(seq 1 1200); do grep -q "Kafka writes succeed again" "$work/log" && break; sleep 0.1; done
	if ! grep -q "Kafka writes succeed again" "$work/log"; then
		echo "run $run: no write acknowledged within 120 s of the broker becoming reachable"
	else
		python3 - "$(awk '{print $2}' "$work/fwd")" "$(grep -m1 "Kafka writes succeed again" "$work/log")" "$run" <<'PY'
import datetime, json, sys
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
line = json.loads(sys.argv[2])
print("run %s: first write acknowledged %.1f s after the broker became reachable (%s failed writes before)"
      % (sys.argv[3], (t(line["time"]) - t(sys.argv[1])).total_seconds(), line.get("failed_writes", "?")))
PY
	fi
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	pids=()
done
