#!/bin/bash
# Runs the module's Go benchmarks at two commits, in turn, ROUNDS rounds
# (alternating which side goes first), and compares them with benchstat.
#
#   scripts/bench-compare.sh BASE HEAD [ROUNDS]     e.g. 079b960 9b44a5b 5
#
# Packages that moved between the commits are matched by MOVED (old=new,
# space separated); the defaults are the moves into internal/. BENCH_FILTER
# narrows a package's benchmarks (pkg=regexp, space separated); the default
# keeps the watcher to its small cycle and release passes, since its 7 000-
# instance cycles take minutes each. PKGS (the base's paths, space separated)
# limits the packages. Needs the test services for the
# ClickHouse and watcher benchmarks (eval "$(deployments/testenv/services.sh env)").
set -euo pipefail
base=$1 head=$2 rounds=${3:-5}
MOVED=${MOVED:-"billing/advice=internal/advicerun billing/watch=internal/watch billing/watch/watche2e=internal/watch/watche2e"}
BENCH_FILTER=${BENCH_FILTER:-"billing/watch=Cycle/mem/held=1000|ReleasePasses"}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; git -C "$root" worktree remove --force "$work/head" >/dev/null 2>&1 || true' EXIT
git -C "$root" worktree add -q --detach "$work/base" "$base"
git -C "$root" worktree add -q --detach "$work/head" "$head"
newpath() { local p=$1 m; for m in $MOVED; do [ "${m%%=*}" = "$p" ] && { echo "${m#*=}"; return; }; done; echo "$p"; }
filter() { local p=$1 f; for f in $BENCH_FILTER; do [ "${f%%=*}" = "$p" ] && { echo "${f#*=}"; return; }; done; echo .; }
pkgs=${PKGS:-}
[ -n "$pkgs" ] || pkgs=$(cd "$work/base" && grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sed 's#^\./##' | sort -u)
for p in $pkgs; do
  n=$(echo "$p" | tr / _)
  (cd "$work/base" && go test -c -o "$work/bin/base/$n.test" "./$p")
  (cd "$work/head" && go test -c -o "$work/bin/head/$n.test" "./$(newpath "$p")")
done
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="base head"; else order="head base"; fi
  for p in $pkgs; do
    n=$(echo "$p" | tr / _)
    for side in $order; do
      d=$p; [ "$side" = head ] && d=$(newpath "$p")
      (cd "$work/$side/$d" && "$work/bin/$side/$n.test" -test.run '^$' -test.bench "$(filter "$p")" -test.benchmem -test.count 1 2>&1) |
        sed -E "s#^pkg: .*#pkg: $p#; s/^(Benchmark[^ \t]*)-[0-9]+/\1/" >> "$work/$side.txt"
      echo "bench-compare: round $r $p $side (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
  done
done
go run golang.org/x/perf/cmd/benchstat@latest "$work/base.txt" "$work/head.txt"
