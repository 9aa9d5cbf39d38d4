#!/usr/bin/env bash
# Private test services for cardhour: ClickHouse, Kafka (KRaft), PostgreSQL,
# an SMTP sink (aiosmtpd), OpenLDAP (slapd) and Dex (OpenID Connect) on loopback.
#
#   services.sh up [SERVICE...]    start what is missing, wait until it answers,
#                                  print exports (SERVICE: clickhouse, kafka,
#                                  postgres, smtp, ldap, dex; default all)
#   services.sh down [SERVICE...]  stop what `up` started; safe to call twice
#   services.sh up chcluster       the ClickHouse cluster profile (not part of the
#                                  default `up`): one ZooKeeper and three
#                                  ClickHouse servers, cluster `cardhour`; prints
#                                  CLICKHOUSE_CLUSTER_ADDRS and CLICKHOUSE_CLUSTER
#   services.sh down chcluster     stop it
#   services.sh env chcluster      print the exports of the last `up chcluster`
#   services.sh kill chcluster N   kill -9 its ClickHouse node N (1..3), for
#                                  fault tests; `up chcluster` restarts it
#   services.sh up kcluster        the Kafka cluster profile (not part of the
#                                  default `up`): three Kafka nodes (KRaft,
#                                  each broker and controller), replication
#                                  factor 3, min.insync.replicas 2; prints
#                                  KAFKA_CLUSTER_BROKERS; restarts a killed node
#   services.sh down kcluster      stop it
#   services.sh env kcluster       print the exports of the last `up kcluster`
#   services.sh kill kcluster N    kill -9 its node N (1..3), for fault tests
#   services.sh stop kcluster N    stop its node N (TERM: controlled shutdown)
#   services.sh status   say what runs
#   services.sh env      print the exports written by the last successful `up`
#   services.sh clean    `down`, then delete data and logs (keeps the Kafka jar cache)
#
# See deployments/testenv/README.md for ports, state dir and env vars.
set -euo pipefail

# ---------------------------------------------------------------- settings
STATE="${CARDHOUR_TESTENV_DIR:-${HOME:-/tmp}/.cache/cardhour-testenv}"
HOST=127.0.0.1
CH_TCP_PORT="${CARDHOUR_TESTENV_CH_PORT:-19000}"
CH_HTTP_PORT="${CARDHOUR_TESTENV_CH_HTTP_PORT:-18123}"
CH_TIMEOUT="${CARDHOUR_TESTENV_CH_TIMEOUT:-60}"
KAFKA_PORT="${CARDHOUR_TESTENV_KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${CARDHOUR_TESTENV_KAFKA_CONTROLLER_PORT:-19093}"
KAFKA_TIMEOUT="${CARDHOUR_TESTENV_KAFKA_TIMEOUT:-90}"
KAFKA_VERSION="${CARDHOUR_TESTENV_KAFKA_VERSION:-4.4.0}"
LOG4J_VERSION="${CARDHOUR_TESTENV_LOG4J_VERSION:-2.25.5}"
KAFKA_HEAP_OPTS="${CARDHOUR_TESTENV_KAFKA_HEAP:--Xms256m -Xmx512m}"

CH_DIR="$STATE/clickhouse"
CH_PID="$STATE/clickhouse.pid"
CH_OUT="$CH_DIR/log/stdout.log"
CH_LOG="$CH_DIR/log/clickhouse-server.log"
CH_ERRLOG="$CH_DIR/log/clickhouse-server.err.log"

KAFKA_DIR="$STATE/kafka"
KAFKA_PID="$STATE/kafka.pid"
KAFKA_OUT="$KAFKA_DIR/log/server.log"
KAFKA_JARS="$STATE/kafka-jars/$KAFKA_VERSION"
KAFKA_PROPS="$KAFKA_DIR/server.properties"
KAFKA_DATA="$KAFKA_DIR/data"

PG_PORT="${CARDHOUR_TESTENV_PG_PORT:-15432}"
PG_TIMEOUT="${CARDHOUR_TESTENV_PG_TIMEOUT:-60}"
PG_BINDIR="${CARDHOUR_TESTENV_PG_BINDIR:-}"
PG_DATABASE=cardhour
PG_SUPERUSER=cardhour
# PG_DIR, PG_DATA, PG_LOG: see pg_dirs.
PG_DIR="" PG_DATA="" PG_LOG=""

SMTP_PORT="${CARDHOUR_TESTENV_SMTP_PORT:-11025}"
SMTP_TIMEOUT="${CARDHOUR_TESTENV_SMTP_TIMEOUT:-30}"
AIOSMTPD_VERSION="${CARDHOUR_TESTENV_AIOSMTPD_VERSION:-1.4.6}"
SMTP_DIR="$STATE/smtp"
SMTP_PID="$STATE/smtp.pid"
SMTP_OUT="$SMTP_DIR/log/smtp-sink.log"
SMTP_MAILDIR="$SMTP_DIR/maildir"
SMTP_VENV="$STATE/aiosmtpd-$AIOSMTPD_VERSION"
SMTP_SINK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/smtp-sink.py"

LDAP_PORT="${CARDHOUR_TESTENV_LDAP_PORT:-13389}"
LDAPS_PORT="${CARDHOUR_TESTENV_LDAPS_PORT:-13636}"
LDAP_TIMEOUT="${CARDHOUR_TESTENV_LDAP_TIMEOUT:-30}"
LDAP_DIR="$STATE/ldap"
LDAP_PID="$STATE/ldap.pid"
LDAP_OUT="$LDAP_DIR/log/slapd.log"
LDAP_BIND="cn=cardhour,ou=services,dc=example,dc=edu"
LDAP_BIND_PW=service-pass

DEX_PORT="${CARDHOUR_TESTENV_DEX_PORT:-15556}"
DEX_TIMEOUT="${CARDHOUR_TESTENV_DEX_TIMEOUT:-30}"
OIDC_REDIRECT_PORT="${CARDHOUR_TESTENV_OIDC_REDIRECT_PORT:-18481}"
DEX_DIR="$STATE/dex"
DEX_PID="$STATE/dex.pid"
DEX_OUT="$DEX_DIR/log/dex.log"
DEX_SECRET="$DEX_DIR/client-secret"
GO="${GO:-go}"

ENV_FILE="$STATE/env"

# Options for short-lived Kafka CLI JVMs (format, readiness check): start fast.
TOOL_JAVA_OPTS=(-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto -Djava.awt.headless=true)

# ---------------------------------------------------------------- helpers
say() { printf 'testenv: %s\n' "$*" >&2; }

RULE='=========================================================================='

# fail_service NAME REASON LOGFILE...: loud, multi-line error on stderr.
fail_service() {
	local name=$1 reason=$2
	shift 2
	{
		echo
		echo "$RULE"
		echo "testenv: ERROR: $name could not be started"
		echo "testenv: reason: $reason"
		local f
		for f in "$@"; do
			[[ -s $f ]] || continue
			echo "testenv: log: $f"
			echo "----- last 30 lines of $f -----"
			tail -n 30 "$f"
			echo "----- end of $f -----"
		done
		echo "testenv: state dir: $STATE"
		echo "testenv: to start from scratch: $0 clean && $0 up"
		echo "$RULE"
		echo
	} >&2
}

# pid_alive PIDFILE: true when the pid file names a live process of ours
# (its command line mentions our state dir, so a recycled pid is not ours).
pid_alive() {
	local f=$1 pid
	[[ -s $f ]] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$STATE"
}

# port_open PORT: something accepts TCP connections on $HOST:PORT.
port_open() {
	timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null
}

# addr_reachable HOST:PORT (first of a comma list): quick TCP probe.
addr_reachable() {
	local a=${1%%,*} h p
	h=${a%:*}
	p=${a##*:}
	[[ -n $h && -n $p && $p =~ ^[0-9]+$ ]] || return 1
	timeout 2 bash -c "exec 3<>/dev/tcp/$h/$p" 2>/dev/null
}

# start_bg PIDFILE OUTFILE CMD...: start CMD in its own session, detached from
# the caller's terminal and process group; the pid file holds CMD's pid.
start_bg() {
	local pidf=$1 out=$2
	shift 2
	rm -f "$pidf"
	[[ -f $out ]] && mv -f "$out" "$out.prev"
	# shellcheck disable=SC2016 # $$ and "$@" expand in the child shell
	setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$pidf" "$@" >"$out" 2>&1 </dev/null 9>&- &
	local _
	for _ in $(seq 1 50); do
		[[ -s $pidf ]] && return 0
		sleep 0.1
	done
	return 1
}

# stop_pid NAME PIDFILE: TERM, wait up to 60 s, then KILL.
stop_pid() {
	local name=$1 f=$2 pid _
	if ! pid_alive "$f"; then
		rm -f "$f"
		say "$name: not running"
		return 0
	fi
	pid=$(<"$f")
	say "$name: stopping pid $pid"
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "$name: pid $pid still alive after 60 s, sending KILL"
		kill -KILL "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -f "$f"
	say "$name: stopped"
}

lock() {
	mkdir -p "$STATE"
	exec 9>"$STATE/lock"
	if ! flock -w 300 9; then
		say "ERROR: another services.sh holds $STATE/lock for more than 300 s"
		exit 1
	fi
}

# ---------------------------------------------------------------- ClickHouse
CH_SERVER=""
CH_CLIENT=""

find_clickhouse() {
	CH_SERVER=$(command -v clickhouse-server || true)
	[[ -z $CH_SERVER && -x /usr/sbin/clickhouse-server ]] && CH_SERVER=/usr/sbin/clickhouse-server
	CH_CLIENT=$(command -v clickhouse-client || true)
	[[ -z $CH_CLIENT && -x /usr/bin/clickhouse-client ]] && CH_CLIENT=/usr/bin/clickhouse-client
	[[ -n $CH_SERVER && -n $CH_CLIENT ]]
}

ensure_clickhouse_installed() {
	find_clickhouse && return 0
	if [[ $(id -u) -ne 0 ]]; then
		fail_service ClickHouse "clickhouse-server/clickhouse-client are not installed and we are not root; run: sudo apt-get install -y clickhouse-server clickhouse-client (or set CLICKHOUSE_ADDR to your own server)"
		return 1
	fi
	local log="$STATE/logs/apt.log"
	mkdir -p "$STATE/logs"
	say "ClickHouse: installing clickhouse-server clickhouse-client with apt-get (log: $log)"
	if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y clickhouse-server clickhouse-client; } >"$log" 2>&1; then
		fail_service ClickHouse "apt-get install clickhouse-server clickhouse-client failed" "$log"
		return 1
	fi
	if ! find_clickhouse; then
		fail_service ClickHouse "apt-get succeeded but clickhouse-server/clickhouse-client are still not found" "$log"
		return 1
	fi
}

write_clickhouse_config() {
	mkdir -p "$CH_DIR/etc" "$CH_DIR/data/tmp" "$CH_DIR/data/user_files" "$CH_DIR/data/format_schemas" "$CH_DIR/log"
	cat >"$CH_DIR/etc/config.xml" <<EOF
<?xml version="1.0"?>
<!-- Generated by deployments/testenv/services.sh; rewritten on every 'up'. -->
<yandex>
    <logger>
        <level>information</level>
        <log>$CH_LOG</log>
        <errorlog>$CH_ERRLOG</errorlog>
        <size>100M</size>
        <count>2</count>
    </logger>
    <listen_host>$HOST</listen_host>
    <tcp_port>$CH_TCP_PORT</tcp_port>
    <http_port>$CH_HTTP_PORT</http_port>
    <path>$CH_DIR/data/</path>
    <tmp_path>$CH_DIR/data/tmp/</tmp_path>
    <user_files_path>$CH_DIR/data/user_files/</user_files_path>
    <format_schema_path>$CH_DIR/data/format_schemas/</format_schema_path>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <max_connections>1024</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <mlock_executable>false</mlock_executable>
</yandex>
EOF
	cat >"$CH_DIR/etc/users.xml" <<'EOF'
<?xml version="1.0"?>
<!-- Generated by deployments/testenv/services.sh: passwordless default user, loopback only. -->
<yandex>
    <profiles>
        <default>
            <max_memory_usage>4000000000</max_memory_usage>
            <use_uncompressed_cache>0</use_uncompressed_cache>
            <load_balancing>random</load_balancing>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
EOF
}

ch_ping() {
	"$CH_CLIENT" --host "$HOST" --port "$CH_TCP_PORT" -q 'SELECT 1' >/dev/null 2>&1
}

# clickhouse_start: start (if needed) without waiting. 0 = starting or running.
clickhouse_start() {
	ensure_clickhouse_installed || return 1
	if pid_alive "$CH_PID"; then
		say "ClickHouse: already running (pid $(<"$CH_PID"))"
		return 0
	fi
	if port_open "$CH_TCP_PORT" || port_open "$CH_HTTP_PORT"; then
		fail_service ClickHouse "port $HOST:$CH_TCP_PORT or $HOST:$CH_HTTP_PORT is already in use by a process this script did not start; stop it, pick other ports (CARDHOUR_TESTENV_CH_PORT / CARDHOUR_TESTENV_CH_HTTP_PORT) or point CLICKHOUSE_ADDR at it"
		return 1
	fi
	write_clickhouse_config
	say "ClickHouse: starting $CH_SERVER on $HOST:$CH_TCP_PORT (http $CH_HTTP_PORT), data in $CH_DIR/data"
	if ! start_bg "$CH_PID" "$CH_OUT" "$CH_SERVER" --config-file="$CH_DIR/etc/config.xml"; then
		fail_service ClickHouse "process did not start" "$CH_OUT"
		return 1
	fi
}

clickhouse_wait() {
	local deadline=$((SECONDS + CH_TIMEOUT))
	while ((SECONDS < deadline)); do
		if ch_ping; then
			say "ClickHouse: ready on $HOST:$CH_TCP_PORT ($("$CH_CLIENT" --host "$HOST" --port "$CH_TCP_PORT" -q 'SELECT version()' 2>/dev/null))"
			return 0
		fi
		if ! pid_alive "$CH_PID"; then
			fail_service ClickHouse "clickhouse-server exited during startup" "$CH_OUT" "$CH_ERRLOG" "$CH_LOG"
			rm -f "$CH_PID"
			return 1
		fi
		sleep 0.3
	done
	fail_service ClickHouse "no answer to 'SELECT 1' on $HOST:$CH_TCP_PORT within ${CH_TIMEOUT}s (still running as pid $(cat "$CH_PID" 2>/dev/null); 'services.sh down' stops it)" "$CH_OUT" "$CH_ERRLOG" "$CH_LOG"
	return 1
}

# ---------------------------------------------------------------- Kafka
java_major() {
	local v
	v=$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)
	v=${v#1.}
	echo "${v%%[.+-]*}"
}

ensure_java() {
	if ! command -v java >/dev/null 2>&1; then
		fail_service Kafka "java is not installed (Java 17+ needed; Debian: apt-get install -y openjdk-17-jre-headless), or set KAFKA_BROKERS to your own broker"
		return 1
	fi
	local m
	m=$(java_major)
	if ! [[ $m =~ ^[0-9]+$ ]] || ((m < 17)); then
		fail_service Kafka "java is version '$m'; Kafka $KAFKA_VERSION needs Java 17+"
		return 1
	fi
}

ensure_kafka_jars() {
	[[ -f $KAFKA_JARS/.complete ]] && return 0
	if ! command -v mvn >/dev/null 2>&1; then
		fail_service Kafka "Kafka jars are not cached in $KAFKA_JARS and mvn is not installed to fetch them (apt-get install -y maven)"
		return 1
	fi
	local pomdir="$STATE/kafka-jars/pom-$KAFKA_VERSION" log="$STATE/logs/kafka-mvn.log" tmp="$KAFKA_JARS.tmp"
	mkdir -p "$pomdir" "$STATE/logs"
	cat >"$pomdir/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by deployments/testenv/services.sh: the jars of a Kafka broker and its CLI tools. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cardhour.testenv</groupId>
  <artifactId>kafka-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
EOF
	say "Kafka: fetching kafka_2.13:$KAFKA_VERSION jars with mvn into $KAFKA_JARS (log: $log)"
	rm -rf "$tmp"
	if ! mvn -B -q -f "$pomdir/pom.xml" dependency:copy-dependencies \
		-DoutputDirectory="$tmp" -DincludeScope=runtime >"$log" 2>&1; then
		rm -rf "$tmp"
		fail_service Kafka "mvn could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION" "$log"
		return 1
	fi
	if ! compgen -G "$tmp/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null; then
		rm -rf "$tmp"
		fail_service Kafka "mvn finished but kafka_2.13-$KAFKA_VERSION.jar is missing" "$log"
		return 1
	fi
	touch "$tmp/.complete"
	rm -rf "$KAFKA_JARS"
	mv "$tmp" "$KAFKA_JARS"
}

write_kafka_config() {
	mkdir -p "$KAFKA_DIR/log"
	cat >"$KAFKA_PROPS" <<EOF
# Generated by deployments/testenv/services.sh; rewritten on every 'up'.
# Single node, KRaft combined mode (broker + controller), loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$KAFKA_DATA
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
log.retention.hours=24
log.segment.bytes=67108864
EOF
	cat >"$KAFKA_DIR/log4j2.properties" <<'EOF'
# Broker logging: INFO to stdout, which services.sh sends to kafka/log/server.log.
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = info
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
EOF
	cat >"$KAFKA_DIR/tools-log4j2.properties" <<'EOF'
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
EOF
}

# kafka_tool CLASS ARGS...: run a Kafka CLI class from the cached jars.
kafka_tool() {
	java "${TOOL_JAVA_OPTS[@]}" -Dlog4j2.configurationFile="file:$KAFKA_DIR/tools-log4j2.properties" \
		-cp "$KAFKA_JARS/*" "$@"
}

new_cluster_id() {
	# Kafka's Uuid string form: 16 random bytes, URL-safe base64, no padding,
	# not starting with '-' (the CLI would read it as an option).
	local id
	while :; do
		id=$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
		[[ $id != -* ]] && break
	done
	echo "$id"
}

# kafka_format: reuse formatted storage when it was made by this config and
# version; otherwise wipe it and format cleanly.
kafka_format() {
	local fp stamp="$KAFKA_DATA/.cardhour-format"
	fp="$KAFKA_VERSION $(sha256sum <"$KAFKA_PROPS" | cut -d' ' -f1)"
	if [[ -f $KAFKA_DATA/meta.properties && -f $stamp && $(<"$stamp") == "$fp" ]]; then
		return 0
	fi
	local log="$KAFKA_DIR/log/format.log" cid
	cid=$(new_cluster_id)
	say "Kafka: formatting storage in $KAFKA_DATA (cluster id $cid)"
	rm -rf "$KAFKA_DATA"
	mkdir -p "$KAFKA_DATA"
	if ! kafka_tool kafka.tools.StorageTool format --standalone -t "$cid" -c "$KAFKA_PROPS" >"$log" 2>&1; then
		fail_service Kafka "kafka.tools.StorageTool format failed" "$log"
		return 1
	fi
	echo "$fp" >"$stamp"
}

kafka_start() {
	ensure_java || return 1
	ensure_kafka_jars || return 1
	if pid_alive "$KAFKA_PID"; then
		say "Kafka: already running (pid $(<"$KAFKA_PID"))"
		return 0
	fi
	if port_open "$KAFKA_PORT" || port_open "$KAFKA_CONTROLLER_PORT"; then
		fail_service Kafka "port $HOST:$KAFKA_PORT or $HOST:$KAFKA_CONTROLLER_PORT is already in use by a process this script did not start; stop it, pick other ports (CARDHOUR_TESTENV_KAFKA_PORT / CARDHOUR_TESTENV_KAFKA_CONTROLLER_PORT) or point KAFKA_BROKERS at it"
		return 1
	fi
	write_kafka_config
	kafka_format || return 1
	say "Kafka: starting $KAFKA_VERSION (KRaft, single node) on $HOST:$KAFKA_PORT, data in $KAFKA_DATA"
	# shellcheck disable=SC2086 # KAFKA_HEAP_OPTS is a list of JVM flags
	if ! start_bg "$KAFKA_PID" "$KAFKA_OUT" java $KAFKA_HEAP_OPTS \
		-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
		-XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="file:$KAFKA_DIR/log4j2.properties" \
		-cp "$KAFKA_JARS/*" kafka.Kafka "$KAFKA_PROPS"; then
		fail_service Kafka "process did not start" "$KAFKA_OUT"
		return 1
	fi
}

kafka_wait() {
	local deadline=$((SECONDS + KAFKA_TIMEOUT))
	# 1. the broker listener accepts connections
	while ! port_open "$KAFKA_PORT"; do
		if ! pid_alive "$KAFKA_PID"; then
			fail_service Kafka "the Kafka JVM exited during startup" "$KAFKA_OUT"
			rm -f "$KAFKA_PID"
			return 1
		fi
		if ((SECONDS >= deadline)); then
			fail_service Kafka "$HOST:$KAFKA_PORT not listening within ${KAFKA_TIMEOUT}s (still running as pid $(cat "$KAFKA_PID" 2>/dev/null); 'services.sh down' stops it)" "$KAFKA_OUT"
			return 1
		fi
		sleep 0.3
	done
	# 2. it serves metadata: an Admin client lists topics
	local left=$((deadline - SECONDS)) log="$KAFKA_DIR/log/readiness.log"
	((left < 5)) && left=5
	if ! timeout "$left" java "${TOOL_JAVA_OPTS[@]}" \
		-Dlog4j2.configurationFile="file:$KAFKA_DIR/tools-log4j2.properties" -cp "$KAFKA_JARS/*" \
		org.apache.kafka.tools.TopicCommand --bootstrap-server "$HOST:$KAFKA_PORT" --list >"$log" 2>&1; then
		fail_service Kafka "broker on $HOST:$KAFKA_PORT did not answer a metadata request (TopicCommand --list) within ${KAFKA_TIMEOUT}s" "$log" "$KAFKA_OUT"
		return 1
	fi
	say "Kafka: ready on $HOST:$KAFKA_PORT"
}

# ---------------------------------------------------------------- PostgreSQL
# Debian's postgresql package; a private cluster (initdb) in $PG_DIR, run with
# pg_ctl. PostgreSQL refuses to run as root: as root, every server command runs
# as the postgres user (runuser), and the cluster lives where that user can
# reach it (see pg_dirs).
PG_BIN=""
PG_AS=()

find_postgres() {
	local d
	PG_BIN=""
	if [[ -n $PG_BINDIR ]]; then
		[[ -x $PG_BINDIR/pg_ctl ]] && PG_BIN=$PG_BINDIR
	else
		for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
			if [[ -x $d/pg_ctl && -x $d/initdb && -x $d/postgres ]]; then
				PG_BIN=$d
				break
			fi
		done
		if [[ -z $PG_BIN ]] && command -v pg_ctl >/dev/null 2>&1; then
			PG_BIN=$(dirname "$(command -v pg_ctl)")
		fi
	fi
	[[ -n $PG_BIN && -x $PG_BIN/psql ]] || [[ -n $PG_BIN && -n $(command -v psql) ]]
}

# pg_psql ARGS...: psql from the server's bin dir, or the one on PATH.
pg_psql() {
	local p=$PG_BIN/psql
	[[ -x $p ]] || p=$(command -v psql)
	"$p" -X -q -h "$HOST" -p "$PG_PORT" -U "$PG_SUPERUSER" "$@"
}

ensure_postgres_installed() {
	find_postgres && return 0
	if [[ $(id -u) -ne 0 ]]; then
		fail_service PostgreSQL "PostgreSQL (initdb, pg_ctl, psql) is not installed and we are not root; run: sudo apt-get install -y postgresql (or set POSTGRES_DSN to your own server)"
		return 1
	fi
	local log="$STATE/logs/apt-postgresql.log"
	mkdir -p "$STATE/logs"
	say "PostgreSQL: installing postgresql with apt-get (log: $log)"
	if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql; } >"$log" 2>&1; then
		fail_service PostgreSQL "apt-get install postgresql failed" "$log"
		return 1
	fi
	if ! find_postgres; then
		fail_service PostgreSQL "apt-get succeeded but initdb/pg_ctl/psql are still not found under /usr/lib/postgresql/*/bin" "$log"
		return 1
	fi
}

# ensure_export_tools: the PDF export tests need poppler-utils (pdftotext,
# pdftoppm, pdffonts) and the PDF's font set (billing/export DefaultFonts): a
# Latin font (fonts-dejavu-core), a CJK font (fonts-droid-fallback) and a CJK
# Extension B font (fonts-hanazono). Installed with apt-get when root, like
# postgresql; otherwise a warning (the tests fail under CI=true and skip loudly
# elsewhere when they are missing).
EXPORT_FONTS=(
	/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core
	/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf:fonts-droid-fallback
	/usr/share/fonts/truetype/hanazono/HanaMinB.ttf:fonts-hanazono
)
ensure_export_tools() {
	local missing=() font
	{ command -v pdftotext && command -v pdftoppm && command -v pdffonts; } >/dev/null 2>&1 || missing+=(poppler-utils)
	for font in "${EXPORT_FONTS[@]}"; do
		[[ -f ${font%%:*} ]] || missing+=("${font##*:}")
	done
	((${#missing[@]})) || return 0
	if [[ $(id -u) -ne 0 ]]; then
		say "WARNING: PDF export tests need ${missing[*]} and we are not root; run: sudo apt-get install -y ${missing[*]}"
		return 0
	fi
	local log="$STATE/logs/apt-export-tools.log"
	say "exports: installing ${missing[*]} with apt-get (log: $log)"
	if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"; } >"$log" 2>&1; then
		say "WARNING: apt-get install ${missing[*]} failed (log: $log); the PDF export tests will fail under CI=true"
	fi
	return 0
}

# ensure_browser: the dashboard's browser test needs headless Chromium (Debian's
# chromium package). Installed with apt-get when root, like the export tools;
# otherwise a warning (the test fails under CI=true and skips loudly elsewhere).
ensure_browser() {
	local c
	for c in ${CARDHOUR_CHROMIUM:-} chromium chromium-browser google-chrome google-chrome-stable; do
		command -v "$c" >/dev/null 2>&1 && return 0
	done
	if [[ $(id -u) -ne 0 ]]; then
		say "WARNING: the dashboard browser test needs Chromium and we are not root; run: sudo apt-get install -y chromium"
		return 0
	fi
	local log="$STATE/logs/apt-chromium.log"
	say "browser: installing chromium with apt-get (log: $log)"
	if ! { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } >"$log" 2>&1; then
		say "WARNING: apt-get install chromium failed (log: $log); the dashboard browser test will fail under CI=true"
	fi
	return 0
}

# pg_dirs [create]: sets PG_DIR (the cluster's home: data/, log/), PG_DATA, PG_LOG and
# PG_AS. As root, the server runs as the postgres user, which must be able to
# reach PG_DIR; when it cannot reach $STATE (e.g. under /root, mode 0700),
# the cluster lives in the postgres user's home instead, in a directory named
# after $STATE, and $STATE/postgres is a symbolic link to it.
pg_dirs() {
	local link="$STATE/postgres"
	PG_AS=()
	PG_DIR=$link
	if [[ $(id -u) -eq 0 ]]; then
		if ! id -u postgres >/dev/null 2>&1; then
			return 1
		fi
		PG_AS=(runuser -u postgres --)
		if [[ -L $link ]]; then
			PG_DIR=$(readlink -f "$link")
		elif [[ ${1:-} == create && ! -d $link ]] && ! runuser -u postgres -- test -x "$STATE"; then
			local home
			home=$(getent passwd postgres | cut -d: -f6)
			PG_DIR="$home/cardhour-testenv/$(printf '%s' "$STATE" | sha256sum | cut -c1-12)"
			mkdir -p "$PG_DIR"
			chown postgres: "$home/cardhour-testenv" "$PG_DIR"
			ln -sfn "$PG_DIR" "$link"
		fi
	fi
	PG_DATA="$PG_DIR/data"
	PG_LOG="$PG_DIR/log/postgresql.log"
}

pg_running() {
	pg_dirs 2>/dev/null || return 1
	find_postgres || return 1
	[[ -f $PG_DATA/PG_VERSION ]] || return 1
	"${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" status >/dev/null 2>&1
}

pg_ping() {
	pg_psql -d "$PG_DATABASE" -tAc 'SELECT 1' 2>/dev/null | grep -qx 1
}

write_postgres_config() {
	# Included from postgresql.conf; rewritten on every 'up'.
	cat >"$PG_DATA/cardhour-testenv.conf" <<CONF
# Generated by deployments/testenv/services.sh; rewritten on every 'up'.
listen_addresses = '$HOST'
port = $PG_PORT
unix_socket_directories = ''
max_connections = 100
shared_buffers = 64MB
# Durable, as in production: the fault tests kill processes and stop the
# server and check that an acknowledged commit (a finalize) survives, which
# fsync=off or synchronous_commit=off would not guarantee.
fsync = on
synchronous_commit = on
full_page_writes = on
timezone = 'UTC'
log_timezone = 'UTC'
CONF
	if ((${#PG_AS[@]})); then chown postgres: "$PG_DATA/cardhour-testenv.conf"; fi
}

postgres_start() {
	ensure_postgres_installed || return 1
	if ! pg_dirs create; then
		fail_service PostgreSQL "running as root and there is no postgres user to run the server as (apt-get install -y postgresql creates it)"
		return 1
	fi
	if pg_running; then
		say "PostgreSQL: already running (data in $PG_DATA)"
		return 0
	fi
	if port_open "$PG_PORT"; then
		fail_service PostgreSQL "port $HOST:$PG_PORT is already in use by a process this script did not start; stop it, pick another port (CARDHOUR_TESTENV_PG_PORT) or point POSTGRES_DSN at it"
		return 1
	fi
	mkdir -p "$PG_DIR/log"
	if ((${#PG_AS[@]})); then chown postgres: "$PG_DIR" "$PG_DIR/log"; fi
	if [[ ! -f $PG_DATA/PG_VERSION ]]; then
		local log="$PG_DIR/log/initdb.log"
		say "PostgreSQL: initdb $PG_DATA ($("$PG_BIN/postgres" --version))"
		rm -rf "$PG_DATA"
		if ! "${PG_AS[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -U "$PG_SUPERUSER" --auth=trust \
			--encoding=UTF8 --locale=C.UTF-8 >"$log" 2>&1 </dev/null; then
			fail_service PostgreSQL "initdb failed" "$log"
			return 1
		fi
		echo "include_if_exists = 'cardhour-testenv.conf'" >>"$PG_DATA/postgresql.conf"
		# Connections from 127.0.0.1 only (listen_addresses), without a password.
		cat >"$PG_DATA/pg_hba.conf" <<HBA
# Generated by deployments/testenv/services.sh: trust, loopback only.
host all all 127.0.0.1/32 trust
HBA
	fi
	write_postgres_config
	say "PostgreSQL: starting on $HOST:$PG_PORT, data in $PG_DATA"
	# pg_ctl start daemonizes the server (in its own session, stdin closed);
	# 9>&-: the server must not inherit (and hold) our lock.
	if ! "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -W start >/dev/null 2>&1 </dev/null 9>&-; then
		fail_service PostgreSQL "pg_ctl start failed" "$PG_LOG"
		return 1
	fi
}

postgres_wait() {
	local deadline=$((SECONDS + PG_TIMEOUT))
	while ((SECONDS < deadline)); do
		if pg_psql -d postgres -tAc 'SELECT 1' 2>/dev/null | grep -qx 1; then
			if ! pg_psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$PG_DATABASE'" | grep -qx 1 &&
				! pg_psql -d postgres -c "CREATE DATABASE \"$PG_DATABASE\"" >"$PG_DIR/log/createdb.log" 2>&1; then
				fail_service PostgreSQL "cannot create database $PG_DATABASE" "$PG_DIR/log/createdb.log"
				return 1
			fi
			say "PostgreSQL: ready on $HOST:$PG_PORT ($(pg_psql -d "$PG_DATABASE" -tAc 'SHOW server_version' 2>/dev/null))"
			return 0
		fi
		if ! pg_running; then
			fail_service PostgreSQL "the server exited during startup" "$PG_LOG"
			return 1
		fi
		sleep 0.3
	done
	fail_service PostgreSQL "no answer to 'SELECT 1' on $HOST:$PG_PORT within ${PG_TIMEOUT}s (still running; 'services.sh down' stops it)" "$PG_LOG"
	return 1
}

postgres_stop() {
	if ! pg_running; then
		say "PostgreSQL: not running"
		return 0
	fi
	say "PostgreSQL: stopping (data in $PG_DATA)"
	if ! "${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m fast -t 60 -w stop >/dev/null 2>&1; then
		say "PostgreSQL: fast shutdown did not finish in 60 s, stopping immediately"
		"${PG_AS[@]}" "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	say "PostgreSQL: stopped"
}

pg_dsn() {
	echo "postgres://$PG_SUPERUSER@$HOST:$PG_PORT/$PG_DATABASE?sslmode=disable"
}

# ---------------------------------------------------------------- SMTP sink
# aiosmtpd from PyPI in a virtual environment under $STATE (like the API
# fuzzer's schemathesis); smtp-sink.py writes every message it accepts to
# $SMTP_MAILDIR/new/, byte for byte.
ensure_aiosmtpd() {
	[[ -f $SMTP_VENV/.installed ]] && return 0
	local log="$STATE/logs/pip-aiosmtpd.log"
	mkdir -p "$STATE/logs"
	if ! command -v python3 >/dev/null 2>&1; then
		fail_service "SMTP sink" "python3 is not installed (Debian: apt-get install -y python3 python3-venv)"
		return 1
	fi
	say "SMTP sink: installing aiosmtpd==$AIOSMTPD_VERSION from PyPI into $SMTP_VENV (log: $log)"
	rm -rf "$SMTP_VENV"
	if ! { python3 -m venv "$SMTP_VENV" && "$SMTP_VENV/bin/pip" install "aiosmtpd==$AIOSMTPD_VERSION"; } >"$log" 2>&1; then
		rm -rf "$SMTP_VENV"
		fail_service "SMTP sink" "could not install aiosmtpd==$AIOSMTPD_VERSION into a virtual environment (python3-venv and PyPI needed)" "$log"
		return 1
	fi
	touch "$SMTP_VENV/.installed"
}

smtp_start() {
	ensure_aiosmtpd || return 1
	if pid_alive "$SMTP_PID"; then
		say "SMTP sink: already running (pid $(<"$SMTP_PID"))"
		return 0
	fi
	if port_open "$SMTP_PORT"; then
		fail_service "SMTP sink" "port $HOST:$SMTP_PORT is already in use by a process this script did not start; stop it, pick another port (CARDHOUR_TESTENV_SMTP_PORT) or point SMTP_ADDR and SMTP_MAILDIR at your own sink"
		return 1
	fi
	mkdir -p "$SMTP_DIR/log" "$SMTP_MAILDIR"
	say "SMTP sink: starting aiosmtpd $AIOSMTPD_VERSION on $HOST:$SMTP_PORT, messages in $SMTP_MAILDIR/new"
	# The pid file's process must mention $STATE (pid_alive): the venv's python does.
	if ! start_bg "$SMTP_PID" "$SMTP_OUT" "$SMTP_VENV/bin/python" "$SMTP_SINK" "$HOST" "$SMTP_PORT" "$SMTP_MAILDIR"; then
		fail_service "SMTP sink" "process did not start" "$SMTP_OUT"
		return 1
	fi
}

smtp_ping() {
	# The greeting of an SMTP server starts with 220.
	timeout 3 bash -c "exec 3<>/dev/tcp/$HOST/$SMTP_PORT; head -c 3 <&3; printf 'QUIT\r\n' >&3" 2>/dev/null | grep -q '^220'
}

smtp_wait() {
	local deadline=$((SECONDS + SMTP_TIMEOUT))
	while ((SECONDS < deadline)); do
		if smtp_ping; then
			say "SMTP sink: ready on $HOST:$SMTP_PORT"
			return 0
		fi
		if ! pid_alive "$SMTP_PID"; then
			fail_service "SMTP sink" "smtp-sink.py exited during startup" "$SMTP_OUT"
			rm -f "$SMTP_PID"
			return 1
		fi
		sleep 0.2
	done
	fail_service "SMTP sink" "no SMTP greeting on $HOST:$SMTP_PORT within ${SMTP_TIMEOUT}s (still running as pid $(cat "$SMTP_PID" 2>/dev/null); 'services.sh down smtp' stops it)" "$SMTP_OUT"
	return 1
}

# ---------------------------------------------------------------- OpenLDAP
# Debian's slapd (the package's own instance is neither configured nor run:
# debconf slapd/no_configuration), our own server from ldap/slapd.conf.tmpl
# as the current user. Every start loads ldap/base.ldif into an empty
# database with slapadd, then adds ldap/groups.ldif online (memberof overlay).
LDAP_TEMPLATES="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/ldap"
ldap_env() {
	export LDAPTLS_CACERT="$LDAP_DIR/tls/ca.pem" LDAPTLS_REQCERT=demand LDAPCONF=/dev/null LDAPRC=/dev/null
}

ensure_slapd_installed() {
	local t ok=1
	for t in /usr/sbin/slapd /usr/sbin/slapadd ldapwhoami ldapadd ldapsearch; do
		command -v "$t" >/dev/null 2>&1 || ok=""
	done
	[[ -n $ok ]] && return 0
	if [[ $(id -u) -ne 0 ]]; then
		fail_service OpenLDAP "slapd/ldap-utils are not installed and we are not root; run: sudo apt-get install -y slapd ldap-utils (or set LDAP_URL and the other LDAP_* variables to your own server)"
		return 1
	fi
	local log="$STATE/logs/apt-slapd.log"
	mkdir -p "$STATE/logs"
	say "OpenLDAP: installing slapd ldap-utils with apt-get, without configuring Debian's own instance (log: $log)"
	if ! { echo "slapd slapd/no_configuration boolean true" | debconf-set-selections &&
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y slapd ldap-utils; } >"$log" 2>&1; then
		fail_service OpenLDAP "apt-get install slapd ldap-utils failed" "$log"
		return 1
	fi
}

# ldap_tls: a CA and a server certificate for 127.0.0.1 and localhost (made
# once; kept while they are valid for another day).
ldap_tls() {
	local d="$LDAP_DIR/tls" log="$LDAP_DIR/log/openssl.log"
	if [[ -s $d/server.pem ]] && openssl x509 -checkend 86400 -noout -in "$d/server.pem" >/dev/null 2>&1; then
		return 0
	fi
	mkdir -p "$d"
	say "OpenLDAP: making a test CA and a server certificate (127.0.0.1, localhost) in $d"
	cat >"$d/server.ext" <<EXT
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
EXT
	if ! {
		openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 3650 -subj "/CN=cardhour testenv CA" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
			-keyout "$d/ca-key.pem" -out "$d/ca.pem" &&
			openssl req -new -nodes -newkey rsa:2048 -sha256 -subj "/CN=127.0.0.1" \
				-keyout "$d/server-key.pem" -out "$d/server.csr" &&
			openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca-key.pem" -CAcreateserial \
				-days 825 -sha256 -extfile "$d/server.ext" -out "$d/server.pem"
	} >"$log" 2>&1; then
		fail_service OpenLDAP "openssl could not make the test certificates" "$log"
		return 1
	fi
	chmod 600 "$d/ca-key.pem" "$d/server-key.pem"
}

LDAP_FRESH=""
ldap_start() {
	ensure_slapd_installed || return 1
	if pid_alive "$LDAP_PID"; then
		say "OpenLDAP: already running (pid $(<"$LDAP_PID"))"
		return 0
	fi
	if port_open "$LDAP_PORT" || port_open "$LDAPS_PORT"; then
		fail_service OpenLDAP "port $HOST:$LDAP_PORT or $HOST:$LDAPS_PORT is already in use by a process this script did not start; stop it, pick other ports (CARDHOUR_TESTENV_LDAP_PORT / CARDHOUR_TESTENV_LDAPS_PORT) or point LDAP_URL at it"
		return 1
	fi
	mkdir -p "$LDAP_DIR/log" "$LDAP_DIR/run"
	ldap_tls || return 1
	sed "s#@LDAP_DIR@#$LDAP_DIR#g" "$LDAP_TEMPLATES/slapd.conf.tmpl" >"$LDAP_DIR/slapd.conf"
	local log="$LDAP_DIR/log/slapadd.log"
	rm -rf "$LDAP_DIR/data"
	mkdir -p "$LDAP_DIR/data"
	if ! /usr/sbin/slapadd -f "$LDAP_DIR/slapd.conf" -l "$LDAP_TEMPLATES/base.ldif" >"$log" 2>&1; then
		fail_service OpenLDAP "slapadd of $LDAP_TEMPLATES/base.ldif failed" "$log"
		return 1
	fi
	say "OpenLDAP: starting slapd on ldap://$HOST:$LDAP_PORT (StartTLS) and ldaps://$HOST:$LDAPS_PORT, data in $LDAP_DIR/data"
	if ! start_bg "$LDAP_PID" "$LDAP_OUT" /usr/sbin/slapd -d stats -f "$LDAP_DIR/slapd.conf" \
		-h "ldap://$HOST:$LDAP_PORT/ ldaps://$HOST:$LDAPS_PORT/"; then
		fail_service OpenLDAP "process did not start" "$LDAP_OUT"
		return 1
	fi
	LDAP_FRESH=1
}

ldap_ping() {
	(
		ldap_env
		ldapwhoami -x -ZZ -H "ldap://$HOST:$LDAP_PORT" -D "$LDAP_BIND" -w "$LDAP_BIND_PW" &&
			ldapwhoami -x -H "ldaps://$HOST:$LDAPS_PORT" -D "$LDAP_BIND" -w "$LDAP_BIND_PW"
	) >/dev/null 2>&1
}

ldap_wait() {
	local deadline=$((SECONDS + LDAP_TIMEOUT)) log="$LDAP_DIR/log/ldapadd.log"
	while ((SECONDS < deadline)); do
		if ldap_ping; then
			if [[ -n $LDAP_FRESH ]] && ! (ldap_env && ldapadd -x -ZZ -H "ldap://$HOST:$LDAP_PORT" \
				-D "cn=admin,dc=example,dc=edu" -w admin-pass -f "$LDAP_TEMPLATES/groups.ldif") >"$log" 2>&1; then
				fail_service OpenLDAP "ldapadd of $LDAP_TEMPLATES/groups.ldif failed" "$log" "$LDAP_OUT"
				return 1
			fi
			say "OpenLDAP: ready on ldap://$HOST:$LDAP_PORT (StartTLS) and ldaps://$HOST:$LDAPS_PORT, CA $LDAP_DIR/tls/ca.pem"
			return 0
		fi
		if ! pid_alive "$LDAP_PID"; then
			fail_service OpenLDAP "slapd exited during startup" "$LDAP_OUT"
			rm -f "$LDAP_PID"
			return 1
		fi
		sleep 0.2
	done
	fail_service OpenLDAP "the service account cannot bind with StartTLS on ldap://$HOST:$LDAP_PORT and on ldaps://$HOST:$LDAPS_PORT within ${LDAP_TIMEOUT}s (still running as pid $(cat "$LDAP_PID" 2>/dev/null); 'services.sh down ldap' stops it)" "$LDAP_OUT"
	return 1
}

# ldap_exports: the LDAP_* lines of the env file.
ldap_exports() {
	printf 'export LDAP_URL=%q\n' "ldap://$HOST:$LDAP_PORT"
	printf 'export LDAPS_URL=%q\n' "ldaps://$HOST:$LDAPS_PORT"
	printf 'export LDAP_CA_FILE=%q\n' "$LDAP_DIR/tls/ca.pem"
	printf 'export LDAP_BIND_DN=%q\n' "$LDAP_BIND"
	printf 'export LDAP_BIND_PASSWORD=%q\n' "$LDAP_BIND_PW"
	printf 'export LDAP_BASE_DN=%q\n' "ou=people,dc=example,dc=edu"
	printf 'export LDAP_GROUP_BASE_DN=%q\n' "ou=groups,dc=example,dc=edu"
}

# ---------------------------------------------------------------- Dex
# Dex (OpenID Connect) built from the module in dex/ (go.mod pins the
# version) into $STATE/bin/dex-<version>, once; minutes the first time, so
# `up` starts the build in the background before the other services.
DEX_MODULE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/dex"
DEX_VERSION=$(awk '$1 == "require" && $2 == "github.com/dexidp/dex" { print $3 } $1 == "github.com/dexidp/dex" { print $2 }' "$DEX_MODULE/go.mod" 2>/dev/null | head -n1)
DEX_BIN="$STATE/bin/dex-${DEX_VERSION:-unknown}"
DEX_BUILD_LOG="$STATE/logs/dex-build.log"
DEX_BUILD_PID=""
DEX_BUILD_START=0

# dex_build_start: start building Dex in the background unless it is built
# (niced: the servers starting meanwhile, Kafka's JVM above all, come first).
dex_build_start() {
	[[ -x $DEX_BIN || -n $DEX_BUILD_PID ]] && return 0
	if [[ -z $DEX_VERSION ]]; then
		fail_service Dex "no github.com/dexidp/dex version in $DEX_MODULE/go.mod"
		return 1
	fi
	if ! command -v "$GO" >/dev/null 2>&1; then
		fail_service Dex "the Go toolchain ($GO) is needed to build Dex $DEX_VERSION (or set OIDC_ISSUER and the other OIDC_* variables to your own provider)"
		return 1
	fi
	mkdir -p "$STATE/bin" "$STATE/logs"
	say "Dex: building github.com/dexidp/dex/cmd/dex $DEX_VERSION into $DEX_BIN in the background (once; minutes the first time; log: $DEX_BUILD_LOG)"
	DEX_BUILD_START=$SECONDS
	(
		cd "$DEX_MODULE" &&
			GOWORK=off CGO_ENABLED=1 GOFLAGS="-mod=readonly -buildvcs=false" nice -n 10 "$GO" build -v -trimpath \
				-ldflags "-X github.com/dexidp/dex/version.Version=$DEX_VERSION" \
				-o "$DEX_BIN.tmp" github.com/dexidp/dex/cmd/dex &&
			mv -f "$DEX_BIN.tmp" "$DEX_BIN"
	) >"$DEX_BUILD_LOG" 2>&1 </dev/null 9>&- &
	DEX_BUILD_PID=$!
}

# dex_build_wait: wait for the background build, saying how far it is.
dex_build_wait() {
	[[ -z $DEX_BUILD_PID ]] && { [[ -x $DEX_BIN ]] || dex_build_start || return 1; }
	[[ -z $DEX_BUILD_PID ]] && return 0
	local next=$((SECONDS + 30))
	while kill -0 "$DEX_BUILD_PID" 2>/dev/null; do
		if ((SECONDS >= next)); then
			say "Dex: still building ($((SECONDS - DEX_BUILD_START)) s, $(wc -l <"$DEX_BUILD_LOG") packages so far)"
			next=$((SECONDS + 30))
		fi
		sleep 1
	done
	local rc=0
	wait "$DEX_BUILD_PID" || rc=$?
	DEX_BUILD_PID=""
	if ((rc != 0)) || [[ ! -x $DEX_BIN ]]; then
		rm -f "$DEX_BIN.tmp"
		fail_service Dex "go build of github.com/dexidp/dex/cmd/dex $DEX_VERSION failed (exit $rc)" "$DEX_BUILD_LOG"
		return 1
	fi
	say "Dex: built $DEX_BIN in $((SECONDS - DEX_BUILD_START)) s"
}

dex_issuer() { echo "http://$HOST:$DEX_PORT/dex"; }

dex_start() {
	dex_build_wait || return 1
	if pid_alive "$DEX_PID"; then
		say "Dex: already running (pid $(<"$DEX_PID"))"
		return 0
	fi
	if port_open "$DEX_PORT"; then
		fail_service Dex "port $HOST:$DEX_PORT is already in use by a process this script did not start; stop it, pick another port (CARDHOUR_TESTENV_DEX_PORT) or point OIDC_ISSUER at it"
		return 1
	fi
	mkdir -p "$DEX_DIR/log"
	if [[ ! -s $DEX_SECRET ]]; then
		(umask 077 && openssl rand -hex 24 >"$DEX_SECRET")
	fi
	sed -e "s#@ISSUER@#$(dex_issuer)#" -e "s#@DEX_ADDR@#$HOST:$DEX_PORT#" \
		-e "s#@REDIRECT_IP@#http://127.0.0.1:$OIDC_REDIRECT_PORT/auth/callback#" \
		-e "s#@REDIRECT_LOCALHOST@#http://localhost:$OIDC_REDIRECT_PORT/auth/callback#" \
		-e "s#@LDAP_HOSTPORT@#$HOST:$LDAP_PORT#" -e "s#@LDAP_CA@#$LDAP_DIR/tls/ca.pem#" \
		"$DEX_MODULE/config.yaml.tmpl" >"$DEX_DIR/config.yaml"
	pid_alive "$LDAP_PID" || say "WARNING: Dex: our OpenLDAP does not run; logins will fail until 'services.sh up ldap'"
	say "Dex: starting $DEX_VERSION on $(dex_issuer) (LDAP connector: ldap://$HOST:$LDAP_PORT with StartTLS)"
	if ! CARDHOUR_TESTENV_OIDC_CLIENT_SECRET=$(<"$DEX_SECRET") start_bg "$DEX_PID" "$DEX_OUT" \
		"$DEX_BIN" serve "$DEX_DIR/config.yaml"; then
		fail_service Dex "process did not start" "$DEX_OUT"
		return 1
	fi
}

dex_ping() {
	curl -fsS --max-time 3 "$(dex_issuer)/.well-known/openid-configuration" 2>/dev/null | grep -qF "\"issuer\": \"$(dex_issuer)\"" ||
		curl -fsS --max-time 3 "$(dex_issuer)/.well-known/openid-configuration" 2>/dev/null | grep -qF "\"issuer\":\"$(dex_issuer)\""
}

dex_wait() {
	local deadline=$((SECONDS + DEX_TIMEOUT))
	while ((SECONDS < deadline)); do
		if dex_ping; then
			say "Dex: ready on $(dex_issuer)"
			return 0
		fi
		if ! pid_alive "$DEX_PID"; then
			fail_service Dex "dex exited during startup" "$DEX_OUT"
			rm -f "$DEX_PID"
			return 1
		fi
		sleep 0.2
	done
	fail_service Dex "no discovery document at $(dex_issuer)/.well-known/openid-configuration within ${DEX_TIMEOUT}s (still running as pid $(cat "$DEX_PID" 2>/dev/null); 'services.sh down dex' stops it)" "$DEX_OUT"
	return 1
}

# dex_exports: the OIDC_* lines of the env file.
dex_exports() {
	printf 'export OIDC_ISSUER=%q\n' "$(dex_issuer)"
	printf 'export OIDC_CLIENT_ID=%q\n' cardhour
	printf 'export OIDC_CLIENT_SECRET=%q\n' "$(<"$DEX_SECRET")"
	printf 'export OIDC_CLIENT_SECRET_FILE=%q\n' "$DEX_SECRET"
	printf 'export OIDC_REDIRECT_URL=%q\n' "http://127.0.0.1:$OIDC_REDIRECT_PORT/auth/callback"
}

# pass_exports NAME...: export lines for the variables of the environment that are set.
pass_exports() {
	local n
	for n in "$@"; do
		[[ -n ${!n:-} ]] && printf 'export %s=%q\n' "$n" "${!n}"
	done
	true
}

# ---------------------------------------------------------------- ClickHouse cluster (profile chcluster)
# Not part of the default `up`: `services.sh up chcluster` starts one Apache
# ZooKeeper and three ClickHouse servers (Debian's 18.16, as above) on their own
# loopback ports, in the remote_servers cluster `cardhour`: shard 1 with two
# replicas (internal_replication), shard 2 with one. Each server has the macros
# shard and replica, and serves distributed DDL (ON CLUSTER).
ZK_VERSION="${CARDHOUR_TESTENV_ZK_VERSION:-3.9.5}"
ZK_METRICS_VERSION=4.1.12.1 # io.dropwizard.metrics, as ZooKeeper 3.9's pom names
ZK_SLF4J_VERSION=2.0.13     # slf4j-simple, matching ZooKeeper 3.9's slf4j-api
ZK_SNAPPY_VERSION=1.1.10.5  # snappy-java (snapshots), as ZooKeeper 3.9's pom names
ZK_PORT="${CARDHOUR_TESTENV_ZK_PORT:-12181}"
ZK_TIMEOUT="${CARDHOUR_TESTENV_ZK_TIMEOUT:-60}"
ZK_DIR="$STATE/zookeeper"
ZK_PID="$STATE/zookeeper.pid"
ZK_OUT="$ZK_DIR/log/zookeeper.log"
ZK_JARS="$STATE/zookeeper-jars/$ZK_VERSION"
CHC_NAME=cardhour
CHC_BASE_TCP="${CARDHOUR_TESTENV_CHC_PORT:-19100}"       # node i: tcp BASE+i
CHC_BASE_HTTP="${CARDHOUR_TESTENV_CHC_HTTP_PORT:-18200}" # node i: http BASE+i
CHC_BASE_REPL="${CARDHOUR_TESTENV_CHC_REPL_PORT:-19200}" # node i: interserver BASE+i
CHC_ENV="$STATE/env-chcluster"
# node i (1..3): shard and replica
chc_shard() { (($1 <= 2)) && echo 1 || echo 2; }
chc_replica() { echo "ch$1"; }
chc_dir() { echo "$STATE/chcluster/ch$1"; }
chc_pid() { echo "$STATE/chcluster-ch$1.pid"; }

ensure_zk_jars() {
	[[ -f $ZK_JARS/.complete ]] && return 0
	if ! command -v mvn >/dev/null 2>&1; then
		fail_service ZooKeeper "ZooKeeper jars are not cached in $ZK_JARS and mvn is not installed to fetch them (apt-get install -y maven)"
		return 1
	fi
	local pomdir="$STATE/zookeeper-jars/pom-$ZK_VERSION" log="$STATE/logs/zookeeper-mvn.log" tmp="$ZK_JARS.tmp"
	mkdir -p "$pomdir" "$STATE/logs"
	cat >"$pomdir/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by deployments/testenv/services.sh: the jars of a ZooKeeper server. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cardhour.testenv</groupId>
  <artifactId>zookeeper-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.zookeeper</groupId><artifactId>zookeeper</artifactId><version>$ZK_VERSION</version></dependency>
    <!-- provided in ZooKeeper's pom, needed by the server: its metrics, and a logger -->
    <dependency><groupId>io.dropwizard.metrics</groupId><artifactId>metrics-core</artifactId><version>$ZK_METRICS_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>$ZK_SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.xerial.snappy</groupId><artifactId>snappy-java</artifactId><version>$ZK_SNAPPY_VERSION</version></dependency>
  </dependencies>
</project>
POM
	say "ZooKeeper: fetching org.apache.zookeeper:zookeeper:$ZK_VERSION jars with mvn into $ZK_JARS (log: $log)"
	rm -rf "$tmp"
	if ! mvn -B -q -f "$pomdir/pom.xml" dependency:copy-dependencies \
		-DoutputDirectory="$tmp" -DincludeScope=runtime >"$log" 2>&1; then
		rm -rf "$tmp"
		fail_service ZooKeeper "mvn could not fetch org.apache.zookeeper:zookeeper:$ZK_VERSION" "$log"
		return 1
	fi
	if ! compgen -G "$tmp/zookeeper-$ZK_VERSION.jar" >/dev/null; then
		rm -rf "$tmp"
		fail_service ZooKeeper "mvn finished but zookeeper-$ZK_VERSION.jar is missing" "$log"
		return 1
	fi
	touch "$tmp/.complete"
	rm -rf "$ZK_JARS"
	mv "$tmp" "$ZK_JARS"
}

zk_ping() {
	# srvr is in the default four-letter-word whitelist of ZooKeeper 3.5+.
	local out
	out=$(timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$ZK_PORT; printf srvr >&3; cat <&3" 2>/dev/null) || return 1
	[[ $out == *"Zookeeper version"* ]]
}

zk_start() {
	ensure_java || return 1
	ensure_zk_jars || return 1
	if pid_alive "$ZK_PID"; then
		say "ZooKeeper: already running (pid $(<"$ZK_PID"))"
		return 0
	fi
	if port_open "$ZK_PORT"; then
		fail_service ZooKeeper "port $HOST:$ZK_PORT is already in use by a process this script did not start; pick another (CARDHOUR_TESTENV_ZK_PORT)"
		return 1
	fi
	mkdir -p "$ZK_DIR/data" "$ZK_DIR/log"
	cat >"$ZK_DIR/zoo.cfg" <<CFG
# Generated by deployments/testenv/services.sh; rewritten on every 'up'. Standalone, loopback only.
tickTime=2000
dataDir=$ZK_DIR/data
clientPortAddress=$HOST
clientPort=$ZK_PORT
maxClientCnxns=200
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,mntr
CFG
	say "ZooKeeper: starting $ZK_VERSION (standalone) on $HOST:$ZK_PORT, data in $ZK_DIR/data"
	if ! start_bg "$ZK_PID" "$ZK_OUT" java -Xms64m -Xmx256m -XX:+UseSerialGC -Djava.awt.headless=true \
		-Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dorg.slf4j.simpleLogger.logFile=System.out -Dzookeeper.admin.enableServer=false \
		-cp "$ZK_JARS/*" org.apache.zookeeper.server.ZooKeeperServerMain "$ZK_DIR/zoo.cfg"; then
		fail_service ZooKeeper "process did not start" "$ZK_OUT"
		return 1
	fi
}

zk_wait() {
	local deadline=$((SECONDS + ZK_TIMEOUT))
	while ((SECONDS < deadline)); do
		if zk_ping; then
			say "ZooKeeper: ready on $HOST:$ZK_PORT"
			return 0
		fi
		if ! pid_alive "$ZK_PID"; then
			fail_service ZooKeeper "the ZooKeeper JVM exited during startup" "$ZK_OUT"
			rm -f "$ZK_PID"
			return 1
		fi
		sleep 0.3
	done
	fail_service ZooKeeper "no answer to 'srvr' on $HOST:$ZK_PORT within ${ZK_TIMEOUT}s" "$ZK_OUT"
	return 1
}

# chc_config I: the config of cluster node I (its own ports, data and macros;
# the same remote_servers and zookeeper sections on every node).
chc_config() {
	local i=$1 d j
	d=$(chc_dir "$i")
	mkdir -p "$d/etc" "$d/data/tmp" "$d/data/user_files" "$d/data/format_schemas" "$d/log"
	local replicas1="" replicas2=""
	for j in 1 2 3; do
		local r="            <replica><host>$HOST</host><port>$((CHC_BASE_TCP + j))</port></replica>"
		if [[ $(chc_shard "$j") == 1 ]]; then replicas1+="$r"$'\n'; else replicas2+="$r"$'\n'; fi
	done
	cat >"$d/etc/config.xml" <<XML
<?xml version="1.0"?>
<!-- Generated by deployments/testenv/services.sh (profile chcluster); rewritten on every 'up'. -->
<yandex>
    <logger>
        <level>information</level>
        <log>$d/log/clickhouse-server.log</log>
        <errorlog>$d/log/clickhouse-server.err.log</errorlog>
        <size>100M</size>
        <count>2</count>
    </logger>
    <listen_host>$HOST</listen_host>
    <tcp_port>$((CHC_BASE_TCP + i))</tcp_port>
    <http_port>$((CHC_BASE_HTTP + i))</http_port>
    <interserver_http_port>$((CHC_BASE_REPL + i))</interserver_http_port>
    <interserver_http_host>$HOST</interserver_http_host>
    <path>$d/data/</path>
    <tmp_path>$d/data/tmp/</tmp_path>
    <user_files_path>$d/data/user_files/</user_files_path>
    <format_schema_path>$d/data/format_schemas/</format_schema_path>
    <users_config>$CH_DIR/etc/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <max_connections>1024</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>134217728</uncompressed_cache_size>
    <mark_cache_size>134217728</mark_cache_size>
    <mlock_executable>false</mlock_executable>
    <remote_servers>
        <$CHC_NAME>
            <shard>
                <internal_replication>true</internal_replication>
$replicas1            </shard>
            <shard>
                <internal_replication>true</internal_replication>
$replicas2            </shard>
        </$CHC_NAME>
    </remote_servers>
    <zookeeper>
        <node><host>$HOST</host><port>$ZK_PORT</port></node>
        <session_timeout_ms>30000</session_timeout_ms>
    </zookeeper>
    <macros>
        <shard>$(chc_shard "$i")</shard>
        <replica>$(chc_replica "$i")</replica>
    </macros>
    <distributed_ddl>
        <path>/clickhouse/task_queue/ddl</path>
    </distributed_ddl>
</yandex>
XML
}

chc_ping() {
	"$CH_CLIENT" --host "$HOST" --port "$((CHC_BASE_TCP + $1))" -q 'SELECT 1' >/dev/null 2>&1
}

chc_start() {
	local i=$1 d pidf port
	d=$(chc_dir "$i") pidf=$(chc_pid "$i") port=$((CHC_BASE_TCP + i))
	if pid_alive "$pidf"; then
		say "ClickHouse cluster node $i: already running (pid $(<"$pidf"))"
		return 0
	fi
	if port_open "$port" || port_open "$((CHC_BASE_HTTP + i))" || port_open "$((CHC_BASE_REPL + i))"; then
		fail_service "ClickHouse cluster node $i" "port $port, $((CHC_BASE_HTTP + i)) or $((CHC_BASE_REPL + i)) on $HOST is already in use by a process this script did not start (CARDHOUR_TESTENV_CHC_PORT / _HTTP_PORT / _REPL_PORT move them)"
		return 1
	fi
	chc_config "$i"
	# A node started again after a kill -9 (the fault tests) may hold parts
	# of inserts that never reached ZooKeeper, and 18.16 then refuses to
	# start ("The local set of parts ... doesn't look like the set of parts
	# in ZooKeeper"). Start it as an operator would after a crash: with the
	# flag that detaches such parts and fetches the rest from its replica.
	if [ -d "$d/data/metadata" ]; then
		mkdir -p "$d/data/flags" && : >"$d/data/flags/force_restore_data"
	fi
	say "ClickHouse cluster node $i: starting on $HOST:$port (shard $(chc_shard "$i"), replica $(chc_replica "$i")), data in $d/data"
	if ! start_bg "$pidf" "$d/log/stdout.log" "$CH_SERVER" --config-file="$d/etc/config.xml"; then
		fail_service "ClickHouse cluster node $i" "process did not start" "$d/log/stdout.log"
		return 1
	fi
}

chc_wait() {
	local i=$1 d deadline=$((SECONDS + CH_TIMEOUT))
	d=$(chc_dir "$i")
	while ((SECONDS < deadline)); do
		chc_ping "$i" && return 0
		if ! pid_alive "$(chc_pid "$i")"; then
			fail_service "ClickHouse cluster node $i" "clickhouse-server exited during startup" "$d/log/stdout.log" "$d/log/clickhouse-server.err.log"
			return 1
		fi
		sleep 0.3
	done
	fail_service "ClickHouse cluster node $i" "no answer to 'SELECT 1' on $HOST:$((CHC_BASE_TCP + i)) within ${CH_TIMEOUT}s" "$d/log/clickhouse-server.err.log"
	return 1
}

# chc_addrs: the native addresses of the three nodes, comma-separated.
chc_addrs() { echo "$HOST:$((CHC_BASE_TCP + 1)),$HOST:$((CHC_BASE_TCP + 2)),$HOST:$((CHC_BASE_TCP + 3))"; }

cmd_up_chcluster() {
	lock
	mkdir -p "$STATE/logs"
	rm -f "$CHC_ENV"
	ensure_clickhouse_installed || exit 1
	# The cluster nodes share the single server's users.xml (passwordless
	# default user, loopback only).
	[[ -f $CH_DIR/etc/users.xml ]] || write_clickhouse_config
	zk_start || exit 1
	zk_wait || exit 1
	local i failed=()
	for i in 1 2 3; do chc_start "$i" || failed+=("node $i"); done
	for i in 1 2 3; do
		pid_alive "$(chc_pid "$i")" || continue
		chc_wait "$i" || failed+=("node $i")
	done
	if ((${#failed[@]})); then
		say "FAILED to start the ClickHouse cluster: ${failed[*]} ('services.sh down chcluster' stops whatever did start)"
		exit 1
	fi
	# Every node sees the cluster and ZooKeeper.
	local q="SELECT count() FROM system.clusters WHERE cluster = '$CHC_NAME'"
	for i in 1 2 3; do
		local n
		n=$("$CH_CLIENT" --host "$HOST" --port "$((CHC_BASE_TCP + i))" -q "$q" 2>&1)
		if [[ $n != 3 ]]; then
			say "ClickHouse cluster node $i: system.clusters has '$n' replicas of cluster $CHC_NAME, want 3"
			exit 1
		fi
		if ! "$CH_CLIENT" --host "$HOST" --port "$((CHC_BASE_TCP + i))" -q "SELECT count() FROM system.zookeeper WHERE path = '/'" >/dev/null 2>&1; then
			say "ClickHouse cluster node $i: cannot reach ZooKeeper on $HOST:$ZK_PORT"
			exit 1
		fi
	done
	say "ClickHouse cluster $CHC_NAME: ready on $(chc_addrs) (ZooKeeper $HOST:$ZK_PORT)"
	{
		printf 'export CLICKHOUSE_CLUSTER_ADDRS=%q\n' "$(chc_addrs)"
		printf 'export CLICKHOUSE_CLUSTER=%q\n' "$CHC_NAME"
		printf 'export ZOOKEEPER_ADDR=%q\n' "$HOST:$ZK_PORT"
	} >"$CHC_ENV.tmp"
	mv -f "$CHC_ENV.tmp" "$CHC_ENV"
	cat "$CHC_ENV"
}

cmd_down_chcluster() {
	lock
	local i
	for i in 3 2 1; do stop_pid "ClickHouse cluster node $i" "$(chc_pid "$i")"; done
	stop_pid ZooKeeper "$ZK_PID"
	rm -f "$CHC_ENV"
}

# cmd_kill_chcluster NODE: KILL (kill -9) cluster node NODE (1..3), for fault
# tests; `up chcluster` starts it again on its data.
cmd_kill_chcluster() {
	local i=${1:-} pidf
	[[ $i =~ ^[123]$ ]] || {
		say "kill chcluster: want a node number, 1, 2 or 3"
		exit 2
	}
	pidf=$(chc_pid "$i")
	if ! pid_alive "$pidf"; then
		say "ClickHouse cluster node $i: not running"
		return 0
	fi
	say "ClickHouse cluster node $i: kill -9 $(<"$pidf")"
	kill -KILL "$(<"$pidf")"
	local _
	for _ in $(seq 1 100); do
		pid_alive "$pidf" || break
		sleep 0.1
	done
	rm -f "$pidf"
}

chc_status() {
	local i rc=0
	for i in 1 2 3; do
		if pid_alive "$(chc_pid "$i")"; then
			echo "ClickHouse cluster node $i: running (pid $(<"$(chc_pid "$i")")) on $HOST:$((CHC_BASE_TCP + i))"
		else
			echo "ClickHouse cluster node $i: not running (profile chcluster)"
			rc=3
		fi
	done
	if pid_alive "$ZK_PID"; then echo "ZooKeeper: running (pid $(<"$ZK_PID")) on $HOST:$ZK_PORT"; else echo "ZooKeeper: not running (profile chcluster)"; fi
	return $rc
}

# ---------------------------------------------------------------- Kafka cluster (profile kcluster)
# Not part of the default `up`: `services.sh up kcluster` starts three Kafka
# nodes (the single node's version and jar cache), each broker and controller
# (KRaft combined mode, a static quorum of the three), on their own loopback
# ports: replication factor 3, min.insync.replicas 2 for new topics, the
# internal topics replicated three times.
KC_BASE_PORT="${CARDHOUR_TESTENV_KC_PORT:-19300}"            # node i: broker BASE+i
KC_BASE_CTRL="${CARDHOUR_TESTENV_KC_CONTROLLER_PORT:-19310}" # node i: controller BASE+i
KC_TIMEOUT="${CARDHOUR_TESTENV_KC_TIMEOUT:-150}"
KC_HEAP_OPTS="${CARDHOUR_TESTENV_KC_HEAP:--Xms128m -Xmx384m}"
KC_DIR="$STATE/kcluster"
KC_ENV="$STATE/env-kcluster"
kc_dir() { echo "$KC_DIR/kafka$1"; }
kc_pid() { echo "$STATE/kcluster-kafka$1.pid"; }
kc_port() { echo $((KC_BASE_PORT + $1)); }
kc_ctrl() { echo $((KC_BASE_CTRL + $1)); }

# kc_brokers: the three broker addresses, comma-separated.
kc_brokers() { echo "$HOST:$(kc_port 1),$HOST:$(kc_port 2),$HOST:$(kc_port 3)"; }

# kc_config I: node I's server.properties.
kc_config() {
	local i=$1 d
	d=$(kc_dir "$i")
	mkdir -p "$d/log"
	cat >"$d/server.properties" <<PROPS
# Generated by deployments/testenv/services.sh (profile kcluster); rewritten on every 'up'.
# Node $i of 3, KRaft combined mode (broker + controller), loopback only.
process.roles=broker,controller
node.id=$i
controller.quorum.voters=1@$HOST:$(kc_ctrl 1),2@$HOST:$(kc_ctrl 2),3@$HOST:$(kc_ctrl 3)
listeners=PLAINTEXT://$HOST:$(kc_port "$i"),CONTROLLER://$HOST:$(kc_ctrl "$i")
advertised.listeners=PLAINTEXT://$HOST:$(kc_port "$i"),CONTROLLER://$HOST:$(kc_ctrl "$i")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$d/data
num.partitions=6
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=3
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
# Fault tests: a killed node leaves the ISRs and its partitions get new
# leaders within seconds (defaults: 30 s and 9 s).
replica.lag.time.max.ms=6000
broker.session.timeout.ms=6000
broker.heartbeat.interval.ms=1000
num.network.threads=2
num.io.threads=2
num.replica.fetchers=1
background.threads=2
log.retention.hours=24
log.segment.bytes=67108864
PROPS
	# The single node's log4j2 files (INFO to stdout; warnings for the tools).
	[[ -f $KAFKA_DIR/log4j2.properties && -f $KAFKA_DIR/tools-log4j2.properties ]] || write_kafka_config
}

# kc_format: format the three nodes' storage with one cluster id, unless all
# three were formatted by this version and these configs.
kc_format() {
	local fp stamp="$KC_DIR/.cardhour-format" i
	fp="$KAFKA_VERSION $(cat "$(kc_dir 1)/server.properties" "$(kc_dir 2)/server.properties" "$(kc_dir 3)/server.properties" | sha256sum | cut -d' ' -f1)"
	if [[ -f $stamp && $(<"$stamp") == "$fp" ]]; then
		local ok=1
		for i in 1 2 3; do [[ -f $(kc_dir "$i")/data/meta.properties ]] || ok=""; done
		[[ -n $ok ]] && return 0
	fi
	local cid log
	cid=$(new_cluster_id)
	rm -f "$stamp"
	for i in 1 2 3; do
		log="$(kc_dir "$i")/log/format.log"
		say "Kafka cluster node $i: formatting storage in $(kc_dir "$i")/data (cluster id $cid)"
		rm -rf "$(kc_dir "$i")/data"
		mkdir -p "$(kc_dir "$i")/data"
		if ! kafka_tool kafka.tools.StorageTool format -t "$cid" -c "$(kc_dir "$i")/server.properties" >"$log" 2>&1; then
			fail_service "Kafka cluster node $i" "kafka.tools.StorageTool format failed" "$log"
			return 1
		fi
	done
	echo "$fp" >"$stamp"
}

kc_start() {
	local i=$1 d pidf
	d=$(kc_dir "$i") pidf=$(kc_pid "$i")
	if pid_alive "$pidf"; then
		say "Kafka cluster node $i: already running (pid $(<"$pidf"))"
		return 0
	fi
	if port_open "$(kc_port "$i")" || port_open "$(kc_ctrl "$i")"; then
		fail_service "Kafka cluster node $i" "port $HOST:$(kc_port "$i") or $HOST:$(kc_ctrl "$i") is already in use by a process this script did not start (CARDHOUR_TESTENV_KC_PORT / CARDHOUR_TESTENV_KC_CONTROLLER_PORT move them)"
		return 1
	fi
	say "Kafka cluster node $i: starting $KAFKA_VERSION on $HOST:$(kc_port "$i") (controller $(kc_ctrl "$i")), data in $d/data"
	# shellcheck disable=SC2086 # KC_HEAP_OPTS is a list of JVM flags
	if ! start_bg "$pidf" "$d/log/server.log" java $KC_HEAP_OPTS \
		-XX:+UseSerialGC -Djava.awt.headless=true \
		-Dlog4j2.configurationFile="file:$KAFKA_DIR/log4j2.properties" \
		-cp "$KAFKA_JARS/*" kafka.Kafka "$d/server.properties"; then
		fail_service "Kafka cluster node $i" "process did not start" "$d/log/server.log"
		return 1
	fi
}

# kc_wait: every running node listens, and the cluster's metadata lists
# the three brokers (BrokerApiVersionsCommand prints one line per broker).
kc_wait() {
	local deadline=$((SECONDS + KC_TIMEOUT)) i
	for i in 1 2 3; do
		while ! port_open "$(kc_port "$i")"; do
			if ! pid_alive "$(kc_pid "$i")"; then
				fail_service "Kafka cluster node $i" "the Kafka JVM exited during startup" "$(kc_dir "$i")/log/server.log"
				rm -f "$(kc_pid "$i")"
				return 1
			fi
			if ((SECONDS >= deadline)); then
				fail_service "Kafka cluster node $i" "$HOST:$(kc_port "$i") not listening within ${KC_TIMEOUT}s" "$(kc_dir "$i")/log/server.log"
				return 1
			fi
			sleep 0.3
		done
	done
	local log="$KC_DIR/readiness.log" n=0
	while ((SECONDS < deadline)); do
		n=$(timeout 30 java "${TOOL_JAVA_OPTS[@]}" -Dlog4j2.configurationFile="file:$KAFKA_DIR/tools-log4j2.properties" -cp "$KAFKA_JARS/*" \
			org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$(kc_brokers)" 2>"$log" | grep -c '(id: [123] ' || true)
		((n == 3)) && return 0
		sleep 1
	done
	fail_service "Kafka cluster" "the cluster's metadata lists $n of 3 brokers after ${KC_TIMEOUT}s" "$log" "$(kc_dir 1)/log/server.log"
	return 1
}

cmd_up_kcluster() {
	lock
	mkdir -p "$STATE/logs" "$KC_DIR"
	rm -f "$KC_ENV"
	ensure_java || exit 1
	ensure_kafka_jars || exit 1
	local i failed=() running=0
	for i in 1 2 3; do pid_alive "$(kc_pid "$i")" && running=$((running + 1)); done
	for i in 1 2 3; do kc_config "$i"; done
	# Format only a cluster none of whose nodes runs (a killed node restarts
	# on its data).
	if ((running == 0)); then kc_format || exit 1; fi
	for i in 1 2 3; do kc_start "$i" || failed+=("node $i"); done
	if ((${#failed[@]})); then
		say "FAILED to start the Kafka cluster: ${failed[*]} ('services.sh down kcluster' stops whatever did start)"
		exit 1
	fi
	kc_wait || exit 1
	say "Kafka cluster: ready on $(kc_brokers)"
	printf 'export KAFKA_CLUSTER_BROKERS=%q\n' "$(kc_brokers)" >"$KC_ENV.tmp"
	mv -f "$KC_ENV.tmp" "$KC_ENV"
	cat "$KC_ENV"
}

# cmd_down_kcluster: TERM the three nodes at once (one by one, the last
# ones would wait for a controller quorum that is gone), KILL after 60 s.
cmd_down_kcluster() {
	lock
	local i
	for i in 1 2 3; do stop_pid "Kafka cluster node $i" "$(kc_pid "$i")" & done
	wait
	rm -f "$KC_ENV"
}

# cmd_signal_kcluster SIGNAL NODE: kill -9 (KILL) or stop (TERM, a controlled
# shutdown) node NODE (1..3), for fault tests; `up kcluster` starts it again
# on its data.
cmd_signal_kcluster() {
	local sig=$1 i=${2:-} pidf
	[[ $i =~ ^[123]$ ]] || {
		say "kill|stop kcluster: want a node number, 1, 2 or 3"
		exit 2
	}
	pidf=$(kc_pid "$i")
	if [[ $sig == TERM ]]; then
		stop_pid "Kafka cluster node $i" "$pidf"
		return 0
	fi
	if ! pid_alive "$pidf"; then
		say "Kafka cluster node $i: not running"
		return 0
	fi
	say "Kafka cluster node $i: kill -9 $(<"$pidf")"
	kill -KILL "$(<"$pidf")"
	local _
	for _ in $(seq 1 100); do
		pid_alive "$pidf" || break
		sleep 0.1
	done
	rm -f "$pidf"
}

kc_status() {
	local i
	for i in 1 2 3; do
		if pid_alive "$(kc_pid "$i")"; then
			echo "Kafka cluster node $i: running (pid $(<"$(kc_pid "$i")")) on $HOST:$(kc_port "$i")"
		else
			echo "Kafka cluster node $i: not running (profile kcluster)"
		fi
	done
}

# ---------------------------------------------------------------- commands
# want_services ARGS...: sets WANT_CH, WANT_KAFKA, WANT_PG, WANT_SMTP, WANT_LDAP,
# WANT_DEX from the service names given (clickhouse, kafka, postgres, smtp, ldap,
# dex); none given means all.
WANT_CH=1 WANT_KAFKA=1 WANT_PG=1 WANT_SMTP=1 WANT_LDAP=1 WANT_DEX=1
want_services() {
	(($#)) || return 0
	WANT_CH="" WANT_KAFKA="" WANT_PG="" WANT_SMTP="" WANT_LDAP="" WANT_DEX=""
	local s
	for s in "$@"; do
		case $s in
		clickhouse) WANT_CH=1 ;;
		kafka) WANT_KAFKA=1 ;;
		postgres | postgresql) WANT_PG=1 ;;
		smtp) WANT_SMTP=1 ;;
		ldap | openldap | slapd) WANT_LDAP=1 ;;
		dex | oidc) WANT_DEX=1 ;;
		*)
			say "unknown service '$s' (want clickhouse, kafka, postgres, smtp, ldap or dex)"
			exit 2
			;;
		esac
	done
}

cmd_up() {
	want_services "$@"
	lock
	mkdir -p "$STATE/logs"
	rm -f "$ENV_FILE"
	# Dex is built once, in minutes: the build overlaps with the installs
	# and the other starts; Dex is started last.
	local dex_build_failed=""
	if [[ -n $WANT_DEX && -z ${OIDC_ISSUER:-} ]] && ! dex_build_start; then
		dex_build_failed=1
	fi
	ensure_export_tools
	ensure_browser
	local ch_addr="" ch_http="" kafka_addr="" pg_addr="" ch_ext="" kafka_ext="" pg_ext="" failed=()
	local smtp_addr="" smtp_maildir="" smtp_ext=""
	local ldap_ok="" ldap_ext="" dex_ok="" dex_ext=""
	if [[ -n $dex_build_failed ]]; then
		failed+=(Dex)
		dex_ext=1
	fi

	if [[ -n ${CLICKHOUSE_ADDR:-} ]]; then
		ch_addr=$CLICKHOUSE_ADDR ch_http=${CLICKHOUSE_HTTP_ADDR:-} ch_ext=1
		say "ClickHouse: CLICKHOUSE_ADDR=$ch_addr is set; not starting one"
		addr_reachable "$ch_addr" || say "WARNING: ClickHouse at $ch_addr does not accept TCP connections"
	fi
	if [[ -n ${KAFKA_BROKERS:-} ]]; then
		kafka_addr=$KAFKA_BROKERS kafka_ext=1
		say "Kafka: KAFKA_BROKERS=$kafka_addr is set; not starting one"
		addr_reachable "$kafka_addr" || say "WARNING: Kafka at $kafka_addr does not accept TCP connections"
	fi
	if [[ -n ${POSTGRES_DSN:-} ]]; then
		pg_addr=$POSTGRES_DSN pg_ext=1
		say "PostgreSQL: POSTGRES_DSN is set; not starting one"
		local pg_hp
		pg_hp=$(sed -E 's#^[a-z]+://([^@/]*@)?([^/?]*).*#\2#' <<<"$POSTGRES_DSN")
		[[ $pg_hp == *:* ]] || pg_hp="$pg_hp:5432"
		addr_reachable "$pg_hp" || say "WARNING: PostgreSQL at $pg_hp does not accept TCP connections"
	fi
	if [[ -n ${SMTP_ADDR:-} ]]; then
		smtp_addr=$SMTP_ADDR smtp_maildir=${SMTP_MAILDIR:-} smtp_ext=1
		say "SMTP sink: SMTP_ADDR=$smtp_addr is set; not starting one"
		addr_reachable "$smtp_addr" || say "WARNING: SMTP server at $smtp_addr does not accept TCP connections"
	fi
	local ldap_pass="" dex_pass=""
	if [[ -n ${LDAP_URL:-} ]]; then
		ldap_ext=1 ldap_pass=1
		say "OpenLDAP: LDAP_URL=$LDAP_URL is set; not starting one (the LDAP_* variables are passed on)"
		addr_reachable "$(sed -E 's#^[a-z]+://([^/]*).*#\1#' <<<"$LDAP_URL")" || say "WARNING: LDAP server at $LDAP_URL does not accept TCP connections"
	fi
	if [[ -n ${OIDC_ISSUER:-} ]]; then
		dex_ext=1 dex_pass=1
		say "Dex: OIDC_ISSUER=$OIDC_ISSUER is set; not starting one (the OIDC_* variables are passed on)"
	fi
	# Services not asked for are passed on when they already run.
	if [[ -z $WANT_CH && -z $ch_ext ]]; then
		ch_ext=1
		pid_alive "$CH_PID" && ch_addr="$HOST:$CH_TCP_PORT" ch_http="$HOST:$CH_HTTP_PORT"
	fi
	if [[ -z $WANT_KAFKA && -z $kafka_ext ]]; then
		kafka_ext=1
		pid_alive "$KAFKA_PID" && kafka_addr="$HOST:$KAFKA_PORT"
	fi
	if [[ -z $WANT_PG && -z $pg_ext ]]; then
		pg_ext=1
		pg_running && pg_addr=$(pg_dsn)
	fi
	if [[ -z $WANT_SMTP && -z $smtp_ext ]]; then
		smtp_ext=1
		pid_alive "$SMTP_PID" && smtp_addr="$HOST:$SMTP_PORT" smtp_maildir=$SMTP_MAILDIR
	fi

	if [[ -z $WANT_LDAP && -z $ldap_ext ]]; then
		ldap_ext=1
		pid_alive "$LDAP_PID" && ldap_ok=1
	fi
	if [[ -z $WANT_DEX && -z $dex_ext ]]; then
		dex_ext=1
		pid_alive "$DEX_PID" && dex_ok=1
	fi

	# Start all first, then wait for all: the startups overlap.
	local ch_started="" kafka_started="" pg_started="" smtp_started="" ldap_started=""
	if [[ -z $ch_ext ]]; then
		if clickhouse_start; then ch_started=1; else failed+=(ClickHouse); fi
	fi
	if [[ -z $kafka_ext ]]; then
		if kafka_start; then kafka_started=1; else failed+=(Kafka); fi
	fi
	if [[ -z $pg_ext ]]; then
		if postgres_start; then pg_started=1; else failed+=(PostgreSQL); fi
	fi
	if [[ -z $smtp_ext ]]; then
		if smtp_start; then smtp_started=1; else failed+=("SMTP sink"); fi
	fi
	if [[ -z $ldap_ext ]]; then
		if ldap_start; then ldap_started=1; else failed+=(OpenLDAP); fi
	fi
	if [[ -n $ch_started ]]; then
		if clickhouse_wait; then
			ch_addr="$HOST:$CH_TCP_PORT" ch_http="$HOST:$CH_HTTP_PORT"
		else
			failed+=(ClickHouse)
		fi
	fi
	if [[ -n $kafka_started ]]; then
		if kafka_wait; then kafka_addr="$HOST:$KAFKA_PORT"; else failed+=(Kafka); fi
	fi
	if [[ -n $pg_started ]]; then
		if postgres_wait; then pg_addr=$(pg_dsn); else failed+=(PostgreSQL); fi
	fi
	if [[ -n $smtp_started ]]; then
		if smtp_wait; then smtp_addr="$HOST:$SMTP_PORT" smtp_maildir=$SMTP_MAILDIR; else failed+=("SMTP sink"); fi
	fi
	if [[ -n $ldap_started ]]; then
		if ldap_wait; then ldap_ok=1; else failed+=(OpenLDAP); fi
	fi
	# Dex last: it waits for its build, and its logins need our slapd.
	if [[ -z $dex_ext ]]; then
		if dex_start && dex_wait; then dex_ok=1; else failed+=(Dex); fi
	fi

	# The env file holds what is usable, even after a partial failure.
	{
		# POSTGRES_DSN, the SMTP sink and CLICKHOUSE_HTTP_ADDR (HTTP interface)
		# first: the last two lines are CLICKHOUSE_ADDR (native TCP) and KAFKA_BROKERS.
		[[ -n $pg_addr ]] && printf 'export POSTGRES_DSN=%q\n' "$pg_addr"
		[[ -n $smtp_addr ]] && printf 'export SMTP_ADDR=%q\n' "$smtp_addr"
		[[ -n $smtp_maildir ]] && printf 'export SMTP_MAILDIR=%q\n' "$smtp_maildir"
		[[ -n $ldap_ok ]] && ldap_exports
		[[ -n $dex_ok ]] && dex_exports
		[[ -n $ldap_pass ]] && pass_exports LDAP_URL LDAPS_URL LDAP_CA_FILE LDAP_BIND_DN LDAP_BIND_PASSWORD LDAP_BASE_DN LDAP_GROUP_BASE_DN
		[[ -n $dex_pass ]] && pass_exports OIDC_ISSUER OIDC_CLIENT_ID OIDC_CLIENT_SECRET OIDC_CLIENT_SECRET_FILE OIDC_REDIRECT_URL
		[[ -n $ch_http ]] && printf 'export CLICKHOUSE_HTTP_ADDR=%q\n' "$ch_http"
		[[ -n $ch_addr ]] && printf 'export CLICKHOUSE_ADDR=%q\n' "$ch_addr"
		[[ -n $kafka_addr ]] && printf 'export KAFKA_BROKERS=%q\n' "$kafka_addr"
		true
	} >"$ENV_FILE.tmp"
	mv -f "$ENV_FILE.tmp" "$ENV_FILE"

	if ((${#failed[@]})); then
		{
			echo "$RULE"
			echo "testenv: FAILED to start: ${failed[*]} (details above; 'services.sh down' stops whatever did start)"
			echo "$RULE"
		} >&2
		exit 1
	fi
	cat "$ENV_FILE"
}

cmd_down() {
	want_services "$@"
	lock
	[[ -n $WANT_DEX ]] && stop_pid Dex "$DEX_PID"
	[[ -n $WANT_LDAP ]] && stop_pid OpenLDAP "$LDAP_PID"
	[[ -n $WANT_SMTP ]] && stop_pid "SMTP sink" "$SMTP_PID"
	[[ -n $WANT_PG ]] && postgres_stop
	[[ -n $WANT_KAFKA ]] && stop_pid Kafka "$KAFKA_PID"
	[[ -n $WANT_CH ]] && stop_pid ClickHouse "$CH_PID"
	# The env file names what `up` started; after a partial `down` it is stale.
	rm -f "$ENV_FILE"
}

cmd_status() {
	local rc=0
	if pid_alive "$CH_PID"; then
		find_clickhouse || true
		if [[ -n $CH_CLIENT ]] && ch_ping; then
			echo "ClickHouse: running (pid $(<"$CH_PID")) on $HOST:$CH_TCP_PORT, answering"
		else
			echo "ClickHouse: running (pid $(<"$CH_PID")) on $HOST:$CH_TCP_PORT, NOT answering yet"
		fi
	else
		echo "ClickHouse: not running (log: $CH_DIR/log)"
		rc=3
	fi
	if pid_alive "$KAFKA_PID"; then
		if port_open "$KAFKA_PORT"; then
			echo "Kafka: running (pid $(<"$KAFKA_PID")) on $HOST:$KAFKA_PORT, listening"
		else
			echo "Kafka: running (pid $(<"$KAFKA_PID")) on $HOST:$KAFKA_PORT, NOT listening yet"
		fi
	else
		echo "Kafka: not running (log: $KAFKA_OUT)"
		rc=3
	fi
	if pg_running; then
		if pg_ping; then
			echo "PostgreSQL: running on $HOST:$PG_PORT, answering ($(pg_dsn))"
		else
			echo "PostgreSQL: running on $HOST:$PG_PORT, NOT answering yet"
		fi
	else
		echo "PostgreSQL: not running (log: $STATE/postgres/log)"
		rc=3
	fi
	if pid_alive "$SMTP_PID"; then
		if smtp_ping; then
			echo "SMTP sink: running (pid $(<"$SMTP_PID")) on $HOST:$SMTP_PORT, answering (maildir $SMTP_MAILDIR)"
		else
			echo "SMTP sink: running (pid $(<"$SMTP_PID")) on $HOST:$SMTP_PORT, NOT answering yet"
		fi
	else
		echo "SMTP sink: not running (log: $SMTP_OUT)"
		rc=3
	fi
	if pid_alive "$LDAP_PID"; then
		if ldap_ping; then
			echo "OpenLDAP: running (pid $(<"$LDAP_PID")) on ldap://$HOST:$LDAP_PORT and ldaps://$HOST:$LDAPS_PORT, answering"
		else
			echo "OpenLDAP: running (pid $(<"$LDAP_PID")) on ldap://$HOST:$LDAP_PORT, NOT answering yet"
		fi
	else
		echo "OpenLDAP: not running (log: $LDAP_OUT)"
		rc=3
	fi
	if pid_alive "$DEX_PID"; then
		if dex_ping; then
			echo "Dex: running (pid $(<"$DEX_PID")) on $(dex_issuer), answering"
		else
			echo "Dex: running (pid $(<"$DEX_PID")) on $(dex_issuer), NOT answering yet"
		fi
	else
		echo "Dex: not running (log: $DEX_OUT; binary: $DEX_BIN$([[ -x $DEX_BIN ]] || echo ', not built yet'))"
		rc=3
	fi
	[[ -n ${SMTP_ADDR:-} ]] && echo "SMTP_ADDR=$SMTP_ADDR is set in this environment (external SMTP server)"
	[[ -n ${LDAP_URL:-} ]] && echo "LDAP_URL=$LDAP_URL is set in this environment (external LDAP server)"
	[[ -n ${OIDC_ISSUER:-} ]] && echo "OIDC_ISSUER=$OIDC_ISSUER is set in this environment (external OpenID Connect provider)"
	[[ -n ${CLICKHOUSE_HTTP_ADDR:-} ]] && echo "CLICKHOUSE_HTTP_ADDR=$CLICKHOUSE_HTTP_ADDR is set in this environment"
	[[ -n ${CLICKHOUSE_ADDR:-} ]] && echo "CLICKHOUSE_ADDR=$CLICKHOUSE_ADDR is set in this environment (external ClickHouse)"
	[[ -n ${KAFKA_BROKERS:-} ]] && echo "KAFKA_BROKERS=$KAFKA_BROKERS is set in this environment (external Kafka)"
	[[ -n ${POSTGRES_DSN:-} ]] && echo "POSTGRES_DSN=$POSTGRES_DSN is set in this environment (external PostgreSQL)"
	chc_status || true
	kc_status
	echo "state dir: $STATE"
	return $rc
}

cmd_env() {
	# `env chcluster`: the cluster profile's exports alone (not part of the
	# default env, so that the default test run stays as it is).
	if [[ ${1:-} == chcluster ]]; then
		if [[ ! -s $CHC_ENV ]]; then
			say "no $CHC_ENV: run 'services.sh up chcluster' first"
			exit 1
		fi
		cat "$CHC_ENV"
		return 0
	fi
	if [[ ${1:-} == kcluster ]]; then
		if [[ ! -s $KC_ENV ]]; then
			say "no $KC_ENV: run 'services.sh up kcluster' first"
			exit 1
		fi
		cat "$KC_ENV"
		return 0
	fi
	if [[ ! -s $ENV_FILE ]]; then
		say "no $ENV_FILE: run 'services.sh up' first"
		exit 1
	fi
	cat "$ENV_FILE"
}

cmd_clean() {
	cmd_down
	cmd_down_chcluster
	cmd_down_kcluster
	say "removing the cluster profiles' data: $STATE/chcluster $ZK_DIR $KC_DIR"
	rm -rf "$STATE/chcluster" "$ZK_DIR" "$KC_DIR"
	local pg_real=""
	[[ -L $STATE/postgres ]] && pg_real=$(readlink -f "$STATE/postgres")
	say "removing $CH_DIR $KAFKA_DIR $SMTP_DIR $LDAP_DIR $DEX_DIR $STATE/postgres${pg_real:+ ($pg_real)} $STATE/logs (the jar cache $STATE/kafka-jars, the aiosmtpd venv and the Dex binary in $STATE/bin stay)"
	[[ -n $pg_real ]] && rm -rf "$pg_real"
	rm -rf "$CH_DIR" "$KAFKA_DIR" "$SMTP_DIR" "$LDAP_DIR" "$DEX_DIR" "$STATE/postgres" "$STATE/logs"
}

usage() {
	echo "usage: $0 up|down [clickhouse|kafka|postgres|smtp|ldap|dex...] | up|down|env chcluster|kcluster | kill chcluster|kcluster N | stop kcluster N | status|env|clean" >&2
	exit 2
}

cmd=${1:-}
(($#)) && shift
case "$cmd" in
up) case ${1:-} in chcluster) cmd_up_chcluster ;; kcluster) cmd_up_kcluster ;; *) cmd_up "$@" ;; esac ;;
down) case ${1:-} in chcluster) cmd_down_chcluster ;; kcluster) cmd_down_kcluster ;; *) cmd_down "$@" ;; esac ;;
kill) case ${1:-} in chcluster) cmd_kill_chcluster "${2:-}" ;; kcluster) cmd_signal_kcluster KILL "${2:-}" ;; *) usage ;; esac ;;
stop) if [[ ${1:-} == kcluster ]]; then cmd_signal_kcluster TERM "${2:-}"; else usage; fi ;;
status) cmd_status ;;
env) cmd_env "$@" ;;
clean) cmd_clean ;;
*) usage ;;
esac
