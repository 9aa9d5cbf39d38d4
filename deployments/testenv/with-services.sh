#!/usr/bin/env bash
# with-services.sh CMD [ARGS...]
#
# Starts the test services (services.sh up), exports CLICKHOUSE_ADDR,
# CLICKHOUSE_HTTP_ADDR, KAFKA_BROKERS, POSTGRES_DSN, SMTP_ADDR, SMTP_MAILDIR, the
# LDAP_* and the OIDC_* variables, runs CMD, stops the services again and exits
# with CMD's status.
#
# - Services that were already all running before (e.g. `make services-up`)
#   are left running; so is everything when CARDHOUR_TESTENV_KEEP=1.
# - If the services cannot be started: with CI=true this exits non-zero
#   without running CMD; otherwise it prints a loud WARNING and runs CMD with
#   whatever did start (tests needing the rest are skipped, loudly).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SERVICES="$HERE/services.sh"

if (($# == 0)); then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

ci=false
case "${CI:-}" in
true | TRUE | True | 1 | yes) ci=true ;;
esac

RULE='##########################################################################'

# The test directory (OpenLDAP) and OpenID Connect provider (Dex).
LDAP_OIDC_VARS=(LDAP_URL LDAPS_URL LDAP_CA_FILE LDAP_BIND_DN LDAP_BIND_PASSWORD LDAP_BASE_DN LDAP_GROUP_BASE_DN
	OIDC_ISSUER OIDC_CLIENT_ID OIDC_CLIENT_SECRET OIDC_CLIENT_SECRET_FILE OIDC_REDIRECT_URL)

# Were our services all running already? Then they are not ours to stop.
stop_after=1
if bash "$SERVICES" status >/dev/null 2>&1; then
	stop_after=""
	echo "with-services: test services already running; leaving them running afterwards" >&2
fi
if [[ -n ${CARDHOUR_TESTENV_KEEP:-} ]]; then
	stop_after=""
fi

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	if [[ -n $stop_after ]]; then
		bash "$SERVICES" down || echo "with-services: WARNING: 'services.sh down' failed" >&2
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if exports=$(bash "$SERVICES" up); then
	eval "$exports"
	export CLICKHOUSE_ADDR CLICKHOUSE_HTTP_ADDR KAFKA_BROKERS POSTGRES_DSN SMTP_ADDR SMTP_MAILDIR "${LDAP_OIDC_VARS[@]}"
	echo "with-services: CLICKHOUSE_ADDR=$CLICKHOUSE_ADDR CLICKHOUSE_HTTP_ADDR=${CLICKHOUSE_HTTP_ADDR:-<unset>} KAFKA_BROKERS=$KAFKA_BROKERS POSTGRES_DSN=${POSTGRES_DSN:-<unset>} SMTP_ADDR=${SMTP_ADDR:-<unset>} LDAP_URL=${LDAP_URL:-<unset>} OIDC_ISSUER=${OIDC_ISSUER:-<unset>}" >&2
else
	if [[ $ci == true ]]; then
		{
			echo "$RULE"
			echo "#  ERROR: test services could not be started and CI=true: failing."
			echo "#  See the errors above."
			echo "$RULE"
		} >&2
		exit 1
	fi
	# Partial success: export what does answer (up wrote it to its env file).
	eval "$(bash "$SERVICES" env 2>/dev/null || true)"
	export CLICKHOUSE_ADDR CLICKHOUSE_HTTP_ADDR KAFKA_BROKERS POSTGRES_DSN SMTP_ADDR SMTP_MAILDIR "${LDAP_OIDC_VARS[@]}"
	{
		echo
		echo "$RULE"
		echo "#"
		echo "#  WARNING: the test services could NOT all be started (see above)."
		echo "#  Integration tests that need a missing service will be SKIPPED."
		echo "#    CLICKHOUSE_ADDR=${CLICKHOUSE_ADDR:-<unset>}"
		echo "#    CLICKHOUSE_HTTP_ADDR=${CLICKHOUSE_HTTP_ADDR:-<unset>}"
		echo "#    KAFKA_BROKERS=${KAFKA_BROKERS:-<unset>}"
		echo "#    POSTGRES_DSN=${POSTGRES_DSN:-<unset>}"
		echo "#    LDAP_URL=${LDAP_URL:-<unset>}"
		echo "#    OIDC_ISSUER=${OIDC_ISSUER:-<unset>}"
		echo "#  Fix the error, or run 'make services-up', or point CLICKHOUSE_ADDR /"
		echo "#  KAFKA_BROKERS / POSTGRES_DSN at your own servers. In CI (CI=true) this"
		echo "#  is fatal."
		echo "#"
		echo "$RULE"
		echo
	} >&2
fi

set +e
"$@"
rc=$?
set -e
exit "$rc"
