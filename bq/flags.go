package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/drivers/sqlite"
	"github.com/bqueue/bq/migrations"
)

var (
	// errHelp is returned when -h was asked for: usage printed, exit 0.
	errHelp = errors.New("help requested")
	// errUsage is returned for bad usage, already reported: exit 2.
	errUsage = errors.New("bad usage")
)

// flagSet is a subcommand's flags and the usage line that goes with them.
type flagSet struct {
	*flag.FlagSet
	name, usage, about string
	e                  *env
	fromEnv            []envFlag
}

// envFlag is a flag whose value, when the flag is not given, comes from
// an environment variable.
type envFlag struct {
	flag, variable string
	value          *string
}

// envString defines a string flag that defaults to $variable. The
// variable's value is not the flag's default, which the usage would
// print: it is often a secret (a DSN's password, the dashboard's token).
func (f *flagSet) envString(p *string, name, variable, usage string) {
	f.StringVar(p, name, "", usage+" (default $"+variable+")")
	f.fromEnv = append(f.fromEnv, envFlag{flag: name, variable: variable, value: p})
}

// applyEnv gives the flags of envString not on the command line the
// value of their variable.
func (f *flagSet) applyEnv() {
	given := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	for _, ef := range f.fromEnv {
		if !given[ef.flag] {
			*ef.value = os.Getenv(ef.variable)
		}
	}
}

// newFlagSet returns the flags of subcommand name; usage is its synopsis
// and about a paragraph on what it does.
func newFlagSet(e *env, name, usage, about string) *flagSet {
	fs := flag.NewFlagSet("bq "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // printed by parse and fail, to the right stream
	return &flagSet{FlagSet: fs, name: name, usage: usage, about: about, e: e}
}

func (f *flagSet) printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: bq %s\n\n%s\n\nFlags:\n", f.usage, f.about)
	var b strings.Builder
	f.SetOutput(&b)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
	// PrintDefaults writes each flag as Go's flag package spells it,
	// "  -dsn DSN"; the docs and the usage lines spell it --dsn, which the
	// package takes too.
	for line := range strings.Lines(b.String()) {
		if strings.HasPrefix(line, "  -") {
			line = "  --" + line[len("  -"):]
		}
		io.WriteString(w, line)
	}
}

// flagError rewrites an error of Go's flag package, which names a flag
// with one dash ("flag provided but not defined: -bogus"), with the two
// of the docs and the usage lines.
var flagError = strings.NewReplacer(": -", ": --", "flag -", "flag --", "for -", "for --")

// parse parses args, allowing flags before, between and after the
// positional arguments (`bq migrate up --dsn X` and `bq migrate --dsn X up`
// both work), and returns the positional arguments.
func (f *flagSet) parse(args []string) ([]string, error) {
	var positional []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.printUsage(f.e.stdout)
				return nil, errHelp
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "bad flag syntax") { // it quotes the argument as given
				msg = flagError.Replace(msg)
			}
			return nil, f.fail("%s", msg)
		}
		args = f.Args()
		if len(args) == 0 {
			f.applyEnv()
			return positional, nil
		}
		if args[0] == "--" {
			f.applyEnv()
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// action parses the arguments of a command of actions (bq key, bq
// weight): the first positional argument names the action, the rest are
// its own; --json belongs to its list action alone. want says which
// actions there are, for the usage error of none.
func (f *flagSet) action(args []string, want string) (string, []string, error) {
	pos, err := f.parse(args)
	if err != nil {
		return "", nil, err
	}
	if len(pos) == 0 {
		return "", nil, f.fail("want an action: %s", want)
	}
	if f.given("json") && pos[0] != "list" {
		return "", nil, f.fail("--json is a flag of bq %s list, not of %s", f.name, pos[0])
	}
	return pos[0], pos[1:], nil
}

// fail reports bad usage: the message on one line, then where to find
// the flags (the whole usage would bury the message). run exits 2.
func (f *flagSet) fail(format string, args ...any) error {
	fmt.Fprintf(f.e.stderr, "bq %s: %s\nrun '%s %s -h' for its flags\n", f.name, fmt.Sprintf(format, args...), f.e.command(), f.name)
	return errUsage
}

// dbFlags are the flags of every subcommand that opens the database.
type dbFlags struct {
	dsn    string
	prefix string
}

func (d *dbFlags) register(f *flagSet) {
	f.envString(&d.dsn, "dsn", "BQ_DSN", "database `DSN`: "+dsnForms)
	f.StringVar(&d.prefix, "prefix", migrations.DefaultPrefix, "table-name `prefix` of bq's tables")
}

func (d *dbFlags) validate(f *flagSet) error {
	if d.dsn == "" {
		return f.fail("--dsn is required (or set BQ_DSN)")
	}
	if err := migrations.ValidatePrefix(d.prefix); err != nil {
		return f.fail("--prefix: %v", err)
	}
	return nil
}

// inspect checks the flags and opens a client on their database for a
// command that reads or tends it (inspectConfig).
func (d *dbFlags) inspect(ctx context.Context, f *flagSet) (*bq.Client, error) {
	if err := d.validate(f); err != nil {
		return nil, err
	}
	return d.open(ctx, inspectConfig(f.e.stderr))
}

// open opens a client on the flags' database. A SQLite file must exist
// already: commands that read or tend a database never create one (an
// empty file would then fail as "not migrated"); see create.
func (d *dbFlags) open(ctx context.Context, cfg bq.Config) (*bq.Client, error) {
	cfg.Prefix = d.prefix
	if !strings.HasPrefix(d.dsn, "sqlite:") {
		return bq.Open(ctx, d.dsn, cfg)
	}
	path, err := sqlite.ParseURL(d.dsn)
	if err != nil {
		return nil, err
	}
	drv, err := sqlite.OpenExisting(ctx, path)
	if errors.Is(err, fs.ErrNotExist) {
		create := "bq migrate up --dsn " + d.dsn
		if d.prefix != migrations.DefaultPrefix {
			create += " --prefix " + d.prefix
		}
		return nil, fmt.Errorf("%w (create it with `%s`)", err, create)
	}
	if err != nil {
		return nil, err
	}
	client, err := bq.NewClient(drv, cfg)
	if err != nil {
		drv.Close()
		return nil, err
	}
	return client, nil
}

// create is open for `migrate up`, which creates a missing SQLite file.
func (d *dbFlags) create(ctx context.Context, cfg bq.Config) (*bq.Client, error) {
	cfg.Prefix = d.prefix
	return bq.Open(ctx, d.dsn, cfg)
}

// parseLevel reads a --log-level value.
func (f *flagSet) parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, f.fail("--log-level %q: use debug, info, warn or error", s)
	}
	return l, nil
}

// noArgs rejects positional arguments a subcommand does not take.
func (f *flagSet) noArgs(args []string) error {
	if len(args) > 0 {
		return f.fail("unexpected argument %q", strings.Join(args, " "))
	}
	return nil
}
