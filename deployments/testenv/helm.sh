#!/usr/bin/env bash
# Prints the path of a helm CLI for the chart tests (deployments/deploytest),
# building it with `go install` into the test cache the first time:
#
#   deployments/testenv/helm.sh      # e.g. ~/.cache/cardhour-testenv/helm-v3.22.0/helm
#
# HELM is used as it is when set (a helm already installed). Progress goes to
# stderr, the path to stdout. Building takes a few minutes on two cores; the
# result is kept, keyed by version.
set -euo pipefail

HELM_VERSION=${CARDHOUR_TESTENV_HELM_VERSION:-v3.22.0}
CACHE=${CARDHOUR_TESTENV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cardhour-testenv}
DIR=$CACHE/helm-$HELM_VERSION
GO=${GO:-go}

if [ -n "${HELM:-}" ]; then
	echo "$HELM"
	exit 0
fi
if [ ! -x "$DIR/helm" ]; then
	mkdir -p "$DIR"
	echo "helm.sh: building helm $HELM_VERSION into $DIR (once)" >&2
	tmp=$(mktemp -d "$DIR/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	GOBIN=$tmp CGO_ENABLED=0 GOFLAGS=-mod=mod "$GO" install -trimpath "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
	mv "$tmp/helm" "$DIR/helm"
fi
echo "$DIR/helm"
