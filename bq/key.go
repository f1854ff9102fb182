package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/bqueue/bq"
)

// runKey pauses or resumes a key in every process at once, and lists the
// paused keys.
func runKey(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "key", "key pause|resume|list --dsn DSN [--prefix bq_] [--json] ...\n\n"+
		"\tbq key pause KEY\n"+
		"\tbq key resume KEY\n"+
		"\tbq key list [--json]",
		`KEY is a full key, Group + "/" + Key (bq.Key), as bq status prints it.
"pause" stops every process from claiming the key's jobs, whichever of
their keys it is, until "resume"; the rest of their queues run on.
Enqueues still succeed, running jobs finish, and the key's ready jobs
keep their slots. The pause is stored in the database: it needs no
deploy and survives restarts. "resume" lets the key's jobs run again and
wakes the workers of their queues at once. Pausing a paused key, or
resuming one that is not paused, changes nothing.
"list" prints the paused keys and when each was paused.`)
	var db dbFlags
	db.register(f)
	asJSON := f.Bool("json", false, "print as JSON (list)")
	action, pos, err := f.action(args, "pause KEY, resume KEY or list, e.g. bq key pause --dsn DSN reports.export/acme")
	if err != nil {
		return err
	}
	switch action {
	case "list":
		if err := f.noArgs(pos); err != nil {
			return err
		}
	case "pause", "resume":
		if len(pos) != 1 {
			return f.fail("give one key, e.g. bq key %s --dsn DSN reports.export/acme", action)
		}
	default:
		return f.fail("unknown action %q: use pause, resume or list", action)
	}

	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	if action == "list" {
		keys, err := client.PausedKeys(ctx)
		switch {
		case err != nil:
			return err
		case *asJSON:
			return writeJSON(e.stdout, keys)
		}
		return printPausedKeys(e.stdout, keys, time.Now())
	}
	op, done := client.PauseKey, "paused: its jobs are not claimed until 'bq key resume'"
	if action == "resume" {
		op, done = client.ResumeKey, "resumed: its workers are woken"
	}
	if err := op(ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "key %s %s\n", term(pos[0]), done)
	return nil
}

// printPausedKeys writes bq key list's table.
func printPausedKeys(w io.Writer, keys []bq.PausedKey, now time.Time) error {
	none := "no paused keys: every key's jobs are claimed (bq key pause KEY pauses one)"
	return printTable(w, len(keys), none, "paused keys", func(tw io.Writer) { pausedKeysTable(tw, keys, now) })
}

// pausedKeysTable writes the paused keys' header and rows to tw, for bq
// key list and bq status's PAUSED KEYS.
func pausedKeysTable(tw io.Writer, keys []bq.PausedKey, now time.Time) {
	fmt.Fprintln(tw, "KEY\tPAUSED AT")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\n", term(k.Key), ago(k.PausedAt, now))
	}
}
