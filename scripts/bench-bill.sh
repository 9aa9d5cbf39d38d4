#!/usr/bin/env bash
# Benchmark `cardhour bill` on generated traces of N samples against DuckDB (and
# chDB, ClickHouse's engine in-process, when its Python package is installed)
# answering the question a user would ask of the same file with SQL: held
# seconds and samples per project and user,
#
#   SELECT project, "user", count(*) AS samples, sum(interval_s) AS held_s
#   FROM read_json('samples.jsonl') WHERE project <> '' GROUP BY project, "user"
#
# (chDB: the same over file('samples.jsonl', JSONEachRow)). That is less than
# bill computes (no union of duplicates or overlaps, no gap bridging, no
# period clipping, no prices, no holder conflicts), so the comparison flatters
# the SQL engines. Each contender runs as a fresh process, as a user would run
# it: wall time includes start-up (for DuckDB and chDB, Python and the import).
#
#   scripts/bench-bill.sh                 # 1 M and 10 M samples, 3 rounds
#   ROUNDS=5 scripts/bench-bill.sh 1000000
#
# Rounds interleave the contenders (the order rotates each round) on the same
# file, warmed into the page cache before each run; the table has each one's median wall and CPU
# (user + sys) time, and the median of the per-round ratios bill / DuckDB (and
# bill / chDB), with the load average seen during the rounds: the machine may be
# shared, so only ratios measured side by side mean anything.
#
# DuckDB: $DUCKDB_PYTHON (a python3 that imports duckdb, and chdb if present),
# else a venv made under $BENCH_DIR/venv with `pip install duckdb` (PyPI). chDB
# is used where that python imports it (CHDB=0 skips it; CHDB=1 installs it
# into the venv). Generated files are kept in $BENCH_DIR (default
# /tmp/cardhour-bench) for reruns; 10 M samples take about 3.6 GB.
set -euo pipefail
cd "$(dirname "$0")/.."

sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1000000 10000000)
rounds=${ROUNDS:-3}
dir=${BENCH_DIR:-/tmp/cardhour-bench}
mkdir -p "$dir"

export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
go build -trimpath -o bin/cardhour ./cmd/cardhour
bin=$PWD/bin/cardhour

py=${DUCKDB_PYTHON:-}
if [[ -z $py ]]; then
	py=$dir/venv/bin/python
	if ! "$py" -c 'import duckdb' 2>/dev/null; then
		python3 -m venv "$dir/venv"
		"$dir/venv/bin/pip" install -q duckdb
	fi
	if [[ ${CHDB:-} == 1 ]] && ! "$py" -c 'import chdb' 2>/dev/null; then
		"$dir/venv/bin/pip" install -q chdb
	fi
fi
have_chdb=0
if [[ ${CHDB:-} != 0 ]] && "$py" -c 'import chdb' 2>/dev/null; then
	have_chdb=1
fi

duck_q='SELECT project, "user", count(*) AS samples, sum(interval_s) AS held_s FROM read_json(?) WHERE project <> '"''"' GROUP BY project, "user"'
duck_py='import sys, duckdb
c = duckdb.connect()
c.execute("SET enable_progress_bar = false")
rows = c.execute(sys.argv[2], [sys.argv[1]]).fetchall()
print(len(rows), sum(r[2] for r in rows), sum(r[3] for r in rows))'
chdb_py='import sys, chdb
q = "SELECT project, user, count() AS samples, sum(interval_s) AS held_s FROM file(%s, JSONEachRow) WHERE project != %s GROUP BY project, user FORMAT CSV"
out = chdb.query(q % (repr(sys.argv[1]), repr("")))
rows = [l.split(",") for l in str(out).splitlines() if l]
print(len(rows), sum(int(r[2]) for r in rows), sum(float(r[3]) for r in rows))'

# run NAME CMD...: runs CMD once, appends "NAME wall cpu rss_kb load" to $dir/times.
run() {
	local name=$1
	shift
	local load
	cat "$f" >/dev/null # the file warm in the page cache for every run alike
	load=$(cut -d' ' -f1 /proc/loadavg)
	/usr/bin/time -f '%e %U %S %M' -o "$dir/time.$name" "$@" >"$dir/out.$name" 2>"$dir/err.$name"
	read -r e u s m <"$dir/time.$name"
	echo "$name $e $(awk -v u="$u" -v s="$s" 'BEGIN{print u+s}') $m $load" >>"$dir/times"
}
median() { sort -g | awk '{a[NR]=$1} END{if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
col() { awk -v n="$1" -v c="$2" '$1==n{print $c}' "$dir/times"; }

echo "cardhour bench-bill: $(nproc) cores, $(go version | cut -d' ' -f3), DuckDB $("$py" -c 'import duckdb; print(duckdb.__version__)')$(
	[[ $have_chdb == 1 ]] && echo ", chDB $("$py" -c 'import chdb; print(chdb.__version__)')"), $rounds rounds"
printf '\n%-9s %7s | %-15s %8s %7s | %-15s %-15s | %10s %10s | %s\n' samples "file MB" "bill wall (cpu)" "samp/s" "RSS MB" \
	"DuckDB wall" "chDB wall" "bill/Duck" "bill/chDB" "load (1 min)"
for n in "${sizes[@]}"; do
	f=$dir/samples-$n.jsonl
	if [[ ! -s $f ]]; then
		"$bin" generate --samples "$n" --seed 1 --out "$f.tmp" 2>/dev/null
		mv "$f.tmp" "$f"
	fi
	mb=$(($(stat -c %s "$f") / 1048576))
	: >"$dir/times"
	contenders=(bill duck)
	[[ $have_chdb == 1 ]] && contenders+=(chdb)
	for r in $(seq 1 "$rounds"); do
		k=$(((r - 1) % ${#contenders[@]}))
		order=("${contenders[@]:k}" "${contenders[@]:0:k}")
		for c in "${order[@]}"; do
			case $c in
			bill) run bill "$bin" bill --catalog schemas/examples/catalog.yaml --samples "$f" --period 2026-11 --format json ;;
			duck) run duck "$py" -c "$duck_py" "$f" "$duck_q" ;;
			chdb) run chdb "$py" -c "$chdb_py" "$f" ;;
			esac
		done
	done
	# Per-round ratios, paired by round.
	ratio() { paste <(col bill 2) <(col "$1" 2) | awk '{print $1/$2}' | median; }
	bw=$(col bill 2 | median) bc=$(col bill 3 | median) dw=$(col duck 2 | median) dc=$(col duck 3 | median)
	rss=$(($(col bill 4 | sort -n | tail -1) / 1024))
	rd=$(ratio duck)
	cw="-" cc="" rc="-"
	if [[ $have_chdb == 1 ]]; then
		cw=$(col chdb 2 | median) cc=$(col chdb 3 | median) rc=$(printf '%.2f' "$(ratio chdb)")
	fi
	loads=$(awk '{print $5}' "$dir/times" | sort -g | awk 'NR==1{lo=$1} {hi=$1} END{print lo "-" hi}')
	printf '%-9s %7s | %-15s %8.0f %7s | %-15s %-15s | %10.2f %10s | %s\n' "$n" "$mb" "$bw ($bc)" "$(awk -v n="$n" -v s="$bw" 'BEGIN{print n/s}')" \
		"$rss" "$dw ($dc)" "$cw${cc:+ ($cc)}" "$rd" "$rc" "$loads"
	echo "  DuckDB: $(cat "$dir/out.duck") (groups, samples, held seconds)$([[ $have_chdb == 1 ]] && echo "; chDB: $(cat "$dir/out.chdb")")"
done
echo
echo "target: bill / DuckDB <= 0.50 at 1 M and 10 M (median of the paired rounds)"
