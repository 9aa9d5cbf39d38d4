// Command cardhour meters GPU and MIG instance use and turns it into invoices.
// One binary, one subcommand per job; the work is done by the packages beside it.
//
// Built with -tags collector,grpcnotrace (make build-collector) it is the node
// agent alone (collect, simulate, version): without the billing, ingest,
// ClickHouse and SQLite code and gRPC's trace pages the binary is half the size,
// and so is the part of it resident on every GPU node.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands returns the subcommands of this build: the node collector's always,
// the others unless the binary is built with -tags collector (see
// commands_full.go and commands_collector.go).
func commands() map[string]command {
	cmds := map[string]command{
		"simulate": {"fast-forward a simulated GPU fleet and write its samples (JSON Lines)", runSimulate},
		"collect":  {"sample this node's GPUs and MIG instances and publish them (Kafka, spool)", runCollect},
		"version": {"print the version", func(_ []string, out, _ io.Writer) int {
			fmt.Fprintln(out, "cardhour", version+buildVariant)
			return 0
		}},
	}
	addCommands(cmds)
	return cmds
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
// returns code: 0 after -h, 2 after a usage error (already reported on fs's
// output).
//
// No command takes positional arguments, so a word that is not a flag is an
// error: Go's flag package stops parsing at the first such word, and every flag
// after it would otherwise be ignored without a word (`bill --skip-invalid true
// --user X` would print every student's invoices).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "cardhour %s: unexpected argument %q%s\n", fs.Name(), fs.Arg(0), strayHint(fs, args))
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// strayHint explains the usual cause of a stray word: a value given to a
// boolean flag with a space (`--skip-invalid true`), which the flag package
// reads as the flag alone followed by a word.
func strayHint(fs *flag.FlagSet, args []string) string {
	i := len(args) - fs.NArg()
	if i == 0 {
		return " (this command takes only flags)"
	}
	name := strings.TrimLeft(args[i-1], "-")
	if f := fs.Lookup(name); f != nil && !strings.Contains(args[i-1], "=") {
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			return fmt.Sprintf(" after boolean flag %s: write %s=%s, or leave the value out", args[i-1], args[i-1], fs.Arg(0))
		}
	}
	return " (this command takes only flags; is a flag's value or a '-' missing?)"
}

// setGCPercent sets the Go GC target unless $GOGC is set (which wins).
func setGCPercent(percent int) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
}

// startCPUProfile writes a CPU profile to path until stop is called (path "":
// no profile, stop does nothing).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
