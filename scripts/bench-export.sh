#!/usr/bin/env bash
# Benchmark the XLSX (and CSV) export of a period with 5 000 students: time per
# export from the Go benchmark, and the peak RSS of a process that builds the
# period's documents and writes the workbook once, from /usr/bin/time -v.
# Targets: XLSX < 3 s and < 200 MB RSS.
#
#   scripts/bench-export.sh
set -euo pipefail
cd "$(dirname "$0")/.."

export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/export.test" ./billing/export

echo "== Go benchmarks (5 runs each)"
(cd billing/export && "$dir/export.test" -test.run '^$' -test.bench '5000Students' -test.benchtime 5x -test.benchmem)

echo "== peak RSS of one XLSX export of 5 000 students (documents built in the same process)"
(cd billing/export && /usr/bin/time -v "$dir/export.test" -test.run '^$' \
	-test.bench 'WriteXLSX5000Students' -test.benchtime 1x) 2>"$dir/time.txt" >/dev/null
awk -F': ' '/Maximum resident set size/ {printf "peak RSS: %.0f MB\n", $2/1024}
	/Elapsed \(wall clock\)/ {print "wall clock (build documents + export + process start): " $2}' "$dir/time.txt"
