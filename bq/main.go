// Command bq manages a bq job queue from the shell: it migrates the
// database, runs the dispatcher on its own, shows queue status, runs a
// self-contained demo of per-key concurrency limits, and benchmarks bq.
//
//	bq migrate up|down|status --dsn DSN [--prefix bq_]
//	bq dispatcher --dsn DSN
//	bq status --dsn DSN [--json | --watch]
//	bq explain --dsn DSN JOB_ID
//	bq verify --dsn DSN [--repair] [--json]
//	bq jobs --dsn DSN [--kind K] [--state S] [--key K | --key-prefix P] [--meta k=v] [--tag T] [--json]
//	bq cancel --dsn DSN JOB_ID
//	bq queue pause|resume --dsn DSN QUEUE
//	bq key pause|resume|list --dsn DSN [KEY]
//	bq rate list|show|set|clear --dsn DSN [KEY [LIMIT PERIOD]]
//	bq policy list --dsn DSN [--json]
//	bq weight list|set|clear --dsn DSN [KEY [WEIGHT]]
//	bq ui --dsn DSN [--addr 127.0.0.1:8080] [--token T]
//	bq demo [--dsn DSN]
//	bq bench --dsn DSN --mode drain|steady|keyed|hotkey|backlog [--processes N [--pool P]] [--json]
//
// --dsn defaults to $BQ_DSN. Exit status: 0 on success, 1 on a runtime
// error, 2 on bad usage.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/bqueue/bq/internal/humanize"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) error
}

var commands = []command{
	{"migrate", "apply, roll back or list bq's database migrations", runMigrate},
	{"dispatcher", "run the dispatcher (scheduled jobs, blocked jobs, reaping) until interrupted", runDispatcher},
	{"status", "show queues, limit groups, the most blocked keys and processes", runStatus},
	{"explain", "show what a job waits for, and why", runExplain},
	{"verify", "check the stored rows against bq's invariants; --repair mends what drifted", runVerify},
	{"jobs", "list jobs by kind, queue, state, key, metadata, tag or time, a page at a time", runJobs},
	{"cancel", "cancel a job (a running one is stopped and ends when its run returns)", runCancel},
	{"retry", "retry a failed job (it goes through admission again)", runRetry},
	{"discard", "discard a failed job (it is never run again)", runDiscard},
	{"queue", "pause or resume a queue in every process (pause|resume QUEUE)", runQueue},
	{"key", "pause, resume or list paused keys in every process (pause|resume KEY|list)", runKey},
	{"rate", "list, show, set or clear rate keys' limits (list|show KEY|set KEY LIMIT PERIOD|clear KEY)", runRate},
	{"policy", "list the stored queue policies SyncPolicies wrote (list)", runPolicy},
	{"weight", "list, set or clear keys' fair-share weights (list|set KEY WEIGHT|clear KEY)", runWeight},
	{"workflow", "show or cancel a workflow's tasks, or cancel a batch (show|cancel|cancel-batch ID)", runWorkflow},
	{"ui", "serve the web dashboard (127.0.0.1:8080 by default)", runUI},
	{"demo", "run a self-contained demo of per-key concurrency limits", runDemo},
	{"bench", "measure throughput and latency on a fresh schema or file", runBench},
	{"version", "print bq's version", runVersion},
}

// dsnForms names the DSN of each database, for usage texts.
const dsnForms = "sqlite:///path/to/file.db, postgres://user:pass@host:5432/db or mysql://user:pass@host:3306/db (MySQL 8.0+, MariaDB 10.6+)"

// env is what a subcommand writes to.
type env struct {
	stdout, stderr io.Writer
	// prog runs this command again, in the commands bq prints for the
	// user to run next: "bq", or "go run ./bq" when it was run so.
	prog string
}

// command is how to run bq again, for a command line printed for the
// user to run next.
func (e *env) command() string { return cmp.Or(e.prog, "bq") }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	path, version := "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		path, version = bi.Path, bi.Main.Version
	}
	prog := commandName(os.Args[0], func(p string) bool { _, err := os.Stat(p); return err == nil }, path, version)
	code := run(ctx, os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, prog: prog})
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, e *env) int {
	e, flush := e.redacting(secretsOf(args))
	defer flush()
	if len(args) == 0 {
		printUsage(e.stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		printUsage(e.stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		err := c.run(ctx, e, args[1:])
		switch {
		case err == nil, errors.Is(err, errHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(e.stderr, "bq: %s\n", humanize.Visible(err.Error()))
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "bq: unknown command %q\nrun '%s help' for the commands\n", name, e.command())
	return 2
}

// commandName is how the user runs bq: "bq", or, for a binary `go run`
// built (builtByGoRun), the go run command that runs it again: "go run
// ./bq" in a checkout of bq (exists tells whether ./bq/main.go is there),
// else "go run" of the package path (pkg, from the build info) at its
// module's version when it has one.
func commandName(arg0 string, exists func(path string) bool, pkg, version string) string {
	if !builtByGoRun(arg0) {
		return "bq"
	}
	switch {
	case exists(filepath.Join("bq", "main.go")):
		return "go run ./bq"
	case pkg == "":
		return "bq"
	case version != "" && version != "(devel)":
		return "go run " + pkg + "@" + version
	}
	return "go run " + pkg
}

// builtByGoRun reports whether arg0 is where `go run` puts what it
// builds: a temporary directory, $TMPDIR/go-build.../b001/exe/bq, or
// (since Go 1.24, from the second run on) the build cache,
// $GOCACHE/4c/4ca3f8...-d/bq.
func builtByGoRun(arg0 string) bool {
	dir := filepath.Dir(arg0)
	if filepath.Base(dir) == "exe" && strings.Contains(dir, "go-build") {
		return true
	}
	entry, bucket := filepath.Base(dir), filepath.Base(filepath.Dir(dir))
	hash, ok := strings.CutSuffix(entry, "-d")
	return ok && len(bucket) == 2 && len(hash) == 64 && strings.HasPrefix(hash, bucket) &&
		strings.Trim(hash, "0123456789abcdef") == ""
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `bq is the command-line tool of the bq job queue.

Usage:

	bq <command> [arguments]

Commands:

`)
	for _, c := range commands {
		fmt.Fprintf(w, "	%-11s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
DSNs (--dsn, default $BQ_DSN):

	sqlite:///var/lib/app/jobs.db      SQLite; three slashes before an absolute path,
	sqlite:jobs.db                     none before one relative to the working directory
	postgres://user:pass@host:5432/db  PostgreSQL
	mysql://user:pass@host:3306/db     MySQL 8.0+, MariaDB 10.6+

Run 'bq <command> -h' for a command's flags. Try 'bq demo': it needs no server.
`)
}
