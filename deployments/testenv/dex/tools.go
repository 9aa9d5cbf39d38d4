//go:build tools

// Package dex pins the Dex OpenID Connect provider of the test environment:
// deployments/testenv/services.sh builds github.com/dexidp/dex/cmd/dex at the
// version this module requires (go build, GOWORK=off) into
// $STATE/bin/dex-<version>. It is a module of its own so that the main
// module neither depends on Dex nor builds or tests it.
package dex

import _ "github.com/dexidp/dex/cmd/dex"
