// Command bq inspects a bq job queue from the shell.
//
//	bq status  --dsn DSN [--json]      queues, limit groups, blocked keys, processes
//	bq explain --dsn DSN JOB_ID        what a job waits for, and why
//	bq ui      --dsn DSN [--addr A]    the web dashboard
//
// --dsn defaults to $BQ_DSN. Exit status: 0 on success, 1 on an error, 2
// on bad usage.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

var subcommands = []struct {
	name, summary string
	run           func(args []string) error
}{
	{"status", "show queues, limit groups, the most blocked keys and processes", runStatus},
	{"explain", "say what a job waits for, and why", runExplain},
	{"ui", "serve the web dashboard", runUI},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stderr))
}

// dispatch runs one command line and returns the exit status.
func dispatch(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	for _, c := range subcommands {
		if c.name != args[0] {
			continue
		}
		err := c.run(args[1:])
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		default:
			fmt.Fprintf(stderr, "bq: %v\n", err)
			return 1
		}
	}
	if args[0] != "help" && args[0] != "-h" && args[0] != "--help" {
		fmt.Fprintf(stderr, "bq: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	usage(stderr)
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: bq <command> [flags]\n\nCommands:")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'bq <command> -h' for a command's flags.")
}
