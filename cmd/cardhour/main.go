// Command cardhour meters GPU and MIG instance use and turns it into invoices.
// One binary, one subcommand per job; the work is done by the packages beside it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() map[string]command {
	return map[string]command{
		"bill":     {"compute invoices for a month from a catalog and samples", runBill},
		"generate": {"write synthetic samples (JSON Lines) for tests and benchmarks", runGenerate},
		"ingest":   {"consume samples from Kafka (or back-fill a file) into ClickHouse or SQLite", runIngest},
		"migrate":  {"create or upgrade the ClickHouse schema", runMigrate},
		"simulate": {"fast-forward a simulated GPU fleet and write its samples (JSON Lines)", runSimulate},
		"collect":  {"sample this node's GPUs and MIG instances and publish them (Kafka, spool)", runCollect},
		"idle":     {"list the idle warnings and releases the catalog's policies call for", runIdle},
		"version":  {"print the version", func(_ []string, out, _ io.Writer) int { fmt.Fprintln(out, "cardhour", version); return 0 }},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cardhour <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'cardhour <command> -h' for the flags of a command.")
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "cardhour: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

// parseFlags parses a command's flags. When it returns ok false, the command
// returns code: 0 after -h, 2 after a usage error (already reported by fs).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}
