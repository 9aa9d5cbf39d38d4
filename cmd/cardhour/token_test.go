//go:build !collector

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
	"github.com/cardhour/cardhour/internal/testenv"
)

// A typo in --state is an error naming the missing store and the command
// that creates one, never a new, empty state store with a token for it;
// the same for every token subcommand.
func TestTokenCommandsNeverCreateAStateStore(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{
		{"token", "create", "--state", "sqlite://" + typo, "--role", "admin"},
		{"token", "list", "--state", "sqlite://" + typo},
		{"token", "revoke", "--state", "sqlite://" + typo, "--id", "1"},
	} {
		code, out, errOut := runCLI(t, "", args...)
		require.Equal(t, 1, code, "%v: %s", args, out)
		require.Empty(t, out, "%v printed a token", args)
		require.Contains(t, errOut, "no state store at "+typo+": `cardhour migrate --state sqlite://"+typo+"` creates one", args)
		_, err := os.Stat(typo)
		require.ErrorIs(t, err, os.ErrNotExist, "%v created %s", args, typo)
	}

	// An existing file that is no cardhour database is refused too.
	empty := filepath.Join(dir, "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	code, out, errOut := runCLI(t, "", "token", "create", "--state", "sqlite://"+empty, "--role", "admin")
	require.Equal(t, 1, code, out)
	require.Contains(t, errOut, empty+" holds no state store")

	// migrate --state creates it; then token create works.
	code, out, errOut = runCLI(t, "", "migrate", "--state", "sqlite://"+typo)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "state store sqlite://"+typo+": ledger schema up to date")
	code, out, errOut = runCLI(t, "", "token", "create", "--state", "sqlite://"+typo, "--role", "admin")
	require.Zero(t, code, errOut)
	require.True(t, strings.HasPrefix(out, "cht_"), out)

	// The usage store's file is serve's default state store: it exists.
	usage := "sqlite://" + filepath.Join(dir, "usage.db")
	code, out, errOut = runCLI(t, "", "ingest", "--store", usage, "--from-file", exampleSamples, "--listen", "")
	require.Zero(t, code, out+errOut)
	code, out, errOut = runCLI(t, "", "token", "create", "--state", usage, "--role", "admin")
	require.Zero(t, code, errOut)
	require.True(t, strings.HasPrefix(out, "cht_"), out)
}

// On PostgreSQL, a database without the ledger's schema is refused; migrate
// --state creates the schema.
func TestTokenCreateRefusesPostgresWithoutSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	dsn := testenv.PostgresDSN(t)
	code, out, errOut := runCLI(t, "", "token", "create", "--state", dsn, "--role", "admin")
	require.Equal(t, 1, code, out)
	require.Empty(t, out)
	require.Contains(t, errOut, "the database holds no state store (schema missing): `cardhour migrate --state postgres://…` creates it")
	code, _, errOut = runCLI(t, "", "migrate", "--state", dsn)
	require.Zero(t, code, errOut)
	code, out, errOut = runCLI(t, "", "token", "create", "--state", dsn, "--role", "admin")
	require.Zero(t, code, errOut)
	require.True(t, strings.HasPrefix(out, "cht_"), out)
}

// A lead's or student's --project must be one of the current catalog's.
func TestTokenCreateChecksTheProject(t *testing.T) {
	state := "sqlite://" + filepath.Join(t.TempDir(), "state.db")
	code, _, errOut := runCLI(t, "", "migrate", "--state", state)
	require.Zero(t, code, errOut)

	code, out, errOut := runCLI(t, "", "token", "create", "--state", state, "--role", "lead", "--project", "nlp-lab")
	require.Equal(t, 1, code, out)
	require.Empty(t, out)
	require.Contains(t, errOut, "--project nlp-lab: the state store holds no catalog yet")

	ctx := context.Background()
	led, err := ledgerdsn.Open(ctx, state, ledgerdsn.Options{Clock: time.Now, Existing: true})
	require.NoError(t, err)
	content, err := os.ReadFile(exampleCatalog)
	require.NoError(t, err)
	_, _, err = led.PutCatalog(ctx, "cli:test", content)
	require.NoError(t, err)
	require.NoError(t, led.Close())

	for _, args := range [][]string{
		{"--role", "lead", "--project", "nosuch"},
		{"--role", "student", "--project", "nosuch", "--user", "2023110042"},
	} {
		code, out, errOut = runCLI(t, "", append([]string{"token", "create", "--state", state}, args...)...)
		require.Equal(t, 1, code, "%v: %s", args, out)
		require.Empty(t, out, "%v printed a token", args)
		require.Contains(t, errOut, "--project nosuch: no such project in the current catalog (version 1): want one of ")
		require.Contains(t, errOut, "nlp-lab")
	}
	code, out, errOut = runCLI(t, "", "token", "create", "--state", state, "--role", "lead", "--project", "nlp-lab")
	require.Zero(t, code, errOut)
	require.True(t, strings.HasPrefix(out, "cht_"), out)
	code, out, _ = runCLI(t, "", "token", "list", "--state", state)
	require.Zero(t, code)
	require.Contains(t, out, "nlp-lab")
	require.NotContains(t, out, "nosuch")
}
