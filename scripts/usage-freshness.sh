#!/usr/bin/env bash
# How long after `cardhour ingest` returns a usage report shows new data,
# through serve's report cache: ingests ROUNDS small files, each of a new
# project (fresh1, fresh2, …), into STORE and polls GET /api/v1/usage
# grouped by project until the project appears. Run it while serve (and,
# for the measurement under load, scripts/api-load) runs on that store.
#
#   scripts/usage-freshness.sh http://127.0.0.1:8080 "$TOKEN" clickhouse://127.0.0.1:19000/db [ROUNDS] [PERIOD]
set -euo pipefail
url=${1:?base URL of cardhour serve}
token=${2:?a finance or admin token}
store=${3:?the usage store serve reads}
rounds=${4:-3}
period=${5:-2026-11}
bin=${CARDHOUR:-bin/cardhour}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq "$rounds"); do
	project="fresh$i-$$"
	"$bin" generate -instances 4 -samples 20 -seed "$((1000 + i))" -start "$period" -out - 2>/dev/null |
		sed -E "s/\"project\":\"[^\"]*\"/\"project\":\"$project\"/" >"$work/s.jsonl"
	"$bin" ingest --store "$store" --from-file "$work/s.jsonl" --listen '' >/dev/null 2>&1
	t0=$(date +%s.%N)
	until curl -fsS -H "Authorization: Bearer $token" "$url/api/v1/usage?period=$period&group_by=project" | grep -q "\"$project\""; do
		sleep 0.02
		if [ "$(echo "$(date +%s.%N) - $t0 > 60" | bc)" = 1 ]; then
			echo "usage-freshness: $project not visible after 60 s" >&2
			exit 1
		fi
	done
	echo "$project visible $(echo "$(date +%s.%N) - $t0" | bc) s after ingest returned"
	sleep 2
done
