# Helpers of the cluster benchmark scripts (bench-cluster.sh, bench-fleet.sh),
# sourced by them, not run:
#   chq HOST:PORT QUERY [ARGS...]   clickhouse-client on one server
#   now                             the time in seconds, with nanoseconds
#   median                          the median of the numbers on stdin (the
#                                   lower middle one of an even count)

chq() {
	local a=$1 q=$2
	shift 2
	clickhouse-client --host "${a%:*}" --port "${a##*:}" -q "$q" "$@"
}
now() { date +%s.%N; }
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
