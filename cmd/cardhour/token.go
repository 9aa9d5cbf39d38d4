//go:build !collector

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/ledger/ledgerdsn"
	"github.com/cardhour/cardhour/schemas"
)

func runToken(args []string, stdout, stderr io.Writer) int {
	usage := func() {
		fmt.Fprintln(stderr, "usage: cardhour token create --state DSN --role admin|finance|lead|student [--project P] [--user U] [--name N] [--ttl 2160h]\n  (--project for lead and student, --user for student)")
		fmt.Fprintln(stderr, "       cardhour token list --state DSN")
		fmt.Fprintln(stderr, "       cardhour token revoke --state DSN --id N")
	}
	if len(args) == 0 {
		usage()
		return 2
	}
	switch args[0] {
	case "create":
		return runTokenCreate(args[1:], stdout, stderr)
	case "list":
		return runTokenList(args[1:], stdout, stderr)
	case "revoke":
		return runTokenRevoke(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage()
		return 0
	}
	fmt.Fprintf(stderr, "cardhour token: unknown subcommand %q\n", args[0])
	usage()
	return 2
}

func openState(dsn string, stderr io.Writer, cmd string) (ledger.Store, context.Context, func(), bool) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// Existing: a typo in --state is an error, never a new, empty state
	// store (only migrate, serve and demo create one).
	led, err := ledgerdsn.Open(ctx, dsn, ledgerdsn.Options{Clock: time.Now, Existing: true})
	if err != nil {
		stop()
		fmt.Fprintf(stderr, "cardhour token %s: %v\n", cmd, err)
		return nil, nil, nil, false
	}
	return led, ctx, func() { _ = led.Close(); stop() }, true
}

// runTokenCreate prints the new token's secret, and only that, on stdout:
// it is shown this once (the store keeps its hash).
func runTokenCreate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("token create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state store: sqlite:///path.db or postgres://user@host:port/db")
	role := fs.String("role", "", "admin | finance | lead | student")
	project := fs.String("project", "", "the project (required for lead and student: a student token sees one project)")
	user := fs.String("user", "", "the student ID (required for student)")
	name := fs.String("name", "", "what the token is for")
	ttl := fs.Duration("ttl", 90*24*time.Hour, "lifetime")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cardhour token create --state DSN --role admin|finance|lead|student [--project P] [--user U] [--name N] [--ttl 2160h]\n  (--project for lead and student, --user for student)")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var problems []string
	if *state == "" {
		problems = append(problems, "--state is required")
	}
	if *role == "" {
		problems = append(problems, "--role is required")
	}
	if len(problems) > 0 {
		fmt.Fprintln(stderr, "cardhour token create: "+strings.Join(problems, "; "))
		fs.Usage()
		return 2
	}
	led, ctx, done, ok := openState(*state, stderr, "create")
	if !ok {
		return 1
	}
	defer done()
	if *project != "" {
		if err := checkProject(ctx, led, *project); err != nil {
			fmt.Fprintln(stderr, "cardhour token create:", err)
			return 1
		}
	}
	secret, tok, err := led.CreateToken(ctx, cliActor(), ledger.NewToken{Role: ledger.Role(*role), Project: *project, User: *user, Name: *name, TTL: *ttl})
	if err != nil {
		fmt.Fprintln(stderr, "cardhour token create:", err)
		return 1
	}
	fmt.Fprintln(stdout, secret)
	fmt.Fprintf(stderr, "cardhour token create: token %d (%s), expires %s; the secret above is shown only this once\n", tok.ID, tok.Role, tok.ExpiresAt.Format(time.RFC3339))
	return 0
}

// checkProject fails unless project is one of the current catalog's.
func checkProject(ctx context.Context, led ledger.Store, project string) error {
	v, err := led.CurrentCatalog(ctx)
	if errors.Is(err, ledger.ErrNotFound) {
		return fmt.Errorf("--project %s: the state store holds no catalog yet, so no project can be checked: start `cardhour serve --catalog FILE` (or upload one with PUT /api/v1/catalog) first", project)
	}
	if err != nil {
		return err
	}
	cat, err := schemas.ParseCatalog(v.Content, fmt.Sprintf("catalog version %d", v.Version))
	if err != nil {
		return err
	}
	if _, ok := cat.Project(project); ok {
		return nil
	}
	ids := make([]string, len(cat.Projects))
	for i, p := range cat.Projects {
		ids[i] = p.ID
	}
	return fmt.Errorf("--project %s: no such project in the current catalog (version %d): want one of %s", project, v.Version, strings.Join(ids, ", "))
}

func runTokenList(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("token list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state store: sqlite:///path.db or postgres://user@host:port/db")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *state == "" {
		fmt.Fprintln(stderr, "cardhour token list: --state is required")
		fs.Usage()
		return 2
	}
	led, ctx, done, ok := openState(*state, stderr, "list")
	if !ok {
		return 1
	}
	defer done()
	toks, err := led.Tokens(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "cardhour token list:", err)
		return 1
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tROLE\tPROJECT\tUSER\tNAME\tEXPIRES\tREVOKED")
	for _, t := range toks {
		revoked := ""
		if !t.RevokedAt.IsZero() {
			revoked = t.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Role, t.Project, t.User, t.Name, t.ExpiresAt.Format(time.RFC3339), revoked)
	}
	if err := w.Flush(); err != nil {
		fmt.Fprintln(stderr, "cardhour token list:", err)
		return 1
	}
	return 0
}

func runTokenRevoke(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("token revoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "state store: sqlite:///path.db or postgres://user@host:port/db")
	id := fs.Int64("id", 0, "the token's ID (from token list)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *state == "" || *id <= 0 {
		fmt.Fprintln(stderr, "cardhour token revoke: --state and --id are required")
		fs.Usage()
		return 2
	}
	led, ctx, done, ok := openState(*state, stderr, "revoke")
	if !ok {
		return 1
	}
	defer done()
	t, err := led.RevokeToken(ctx, cliActor(), *id)
	if err != nil {
		fmt.Fprintln(stderr, "cardhour token revoke:", err)
		return 1
	}
	fmt.Fprintf(stdout, "token %d revoked\n", t.ID)
	return 0
}
