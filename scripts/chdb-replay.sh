#!/usr/bin/env bash
# Replay a plan of ClickHouse statements (written by deployments/deploytest's
# TestClickHouse26) on current ClickHouse, in process through chDB (PyPI
# chdb-core), and compare the answers with the test server's.
#
#   scripts/chdb-replay.sh PLAN.json
#
# chdb-core is installed from PyPI into a virtual environment under the test
# cache the first time. Without python3 (with venv) or PyPI the script exits 3
# with a notice (the Go test skips, or fails under CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."

CHDB_VERSION=${CARDHOUR_CHDB_VERSION:-26.9.0}
CACHE=${CARDHOUR_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cardhour-testenv}
VENV=$CACHE/chdb-core-$CHDB_VERSION

[ $# -eq 1 ] || { echo "usage: scripts/chdb-replay.sh PLAN.json" >&2; exit 2; }
unavailable() { echo "chdb-replay: $1" >&2; exit 3; }

if [ ! -f "$VENV/.installed" ]; then
	command -v python3 >/dev/null || unavailable "python3 not found"
	rm -rf "$VENV"
	python3 -m venv "$VENV" >/dev/null 2>&1 || { rm -rf "$VENV"; unavailable "python3 cannot make a virtual environment (Debian: apt-get install python3-venv)"; }
	"$VENV/bin/pip" install -q "chdb-core==$CHDB_VERSION" >&2 || { rm -rf "$VENV"; unavailable "pip could not install chdb-core==$CHDB_VERSION"; }
	touch "$VENV/.installed"
fi
exec "$VENV/bin/python" scripts/chdb-replay.py "$1"
