package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
	"github.com/bqueue/bq/internal/lifecycle"
)

// TestCancelCommand: bq cancel cancels a ready job at once (the slot
// passes to the job blocked behind it), asks a running one to stop, and
// refuses a finished job, an unknown id, a missing or non-numeric id with
// errors that say so, changing nothing.
func TestCancelCommand(t *testing.T) {
	dsn, last := inspectDB(t) // ready last-2, blocked last-1 and last
	ready, next := last-2, last-1
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	if text, err := runCmd(runCancel, "--dsn", dsn, id(ready)); err != nil || !strings.Contains(text, "job "+id(ready)+" cancelled") {
		t.Fatalf("bq cancel of a ready job: %q, %v", text, err)
	}
	for n, want := range map[int64]string{ready: "cancelled", next: "ready", last: "blocked"} {
		if text, err := runCmd(runExplain, "--dsn", dsn, id(n)); err != nil || !strings.Contains(text, "): "+want+"\n") {
			t.Errorf("bq explain %d after the cancel: %v\n%s\nwant it %s", n, err, text, want)
		}
	}
	_, err := runCmd(runCancel, "--dsn", dsn, id(ready))
	if !errors.Is(err, bq.ErrJobFinished) || !strings.Contains(err.Error(), "it is cancelled; nothing changed") {
		t.Errorf("bq cancel of a cancelled job: %v, want ErrJobFinished saying nothing changed", err)
	}
	if _, err := runCmd(runCancel, "--dsn", dsn, "999999"); !errors.Is(err, bq.ErrJobNotFound) {
		t.Errorf("bq cancel of an unknown id: %v, want ErrJobNotFound", err)
	}
	for _, args := range [][]string{{}, {"abc"}, {"-3"}, {id(next), id(last)}} {
		if _, err := runCmd(runCancel, append([]string{"--dsn", dsn}, args...)...); !errors.Is(err, errUsage) {
			t.Errorf("bq cancel %v: %v, want a usage error", args, err)
		}
	}

	c, err := bq.Open(t.Context(), dsn, bq.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	claimAs(t, c, "cancel-worker", "cli", 1, time.Second) // takes next
	text, err := runCmd(runCancel, "--dsn", dsn, id(next))
	if err != nil || !strings.Contains(text, "cancel requested") {
		t.Fatalf("bq cancel of a running job: %q, %v", text, err)
	}
	if text, err := runCmd(runExplain, "--dsn", dsn, id(next)); err != nil || !strings.Contains(text, "Cancel requested at") {
		t.Errorf("bq explain of a running job with a pending cancel: %v\n%s", err, text)
	}
}

// TestRetryAndDiscardCommands: bq retry admits a failed job again (ready,
// its key free), bq discard ends one for good; either refuses a job that
// is not failed, naming its state, and an id that is not one.
func TestRetryAndDiscardCommands(t *testing.T) {
	ctx := t.Context()
	c, dsn := migratedSQLite(t)
	var ids []int64
	for _, account := range []string{"r1", "r2"} {
		res, err := inspectJob.Enqueue(ctx, c, inspectArgs{Account: account})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	_, claims := claimAs(t, c, "retry-worker", "cli", 2, time.Hour)
	eng := driver.ClientEngine(c)
	for _, cl := range claims {
		err := driver.InTx(ctx, eng, func(ex driver.Executor) error {
			_, err := lifecycle.Fail(ctx, ex, cl, "boom", time.Now())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	if text, err := runCmd(runRetry, "--dsn", dsn, id(ids[0])); err != nil || !strings.Contains(text, "job "+id(ids[0])+" retried: it is now ready") {
		t.Fatalf("bq retry of a failed job: %q, %v", text, err)
	}
	if text, err := runCmd(runDiscard, "--dsn", dsn, id(ids[1])); err != nil || !strings.Contains(text, "job "+id(ids[1])+" discarded") {
		t.Fatalf("bq discard of a failed job: %q, %v", text, err)
	}
	for n, want := range map[int64]string{ids[0]: "ready", ids[1]: "discarded"} {
		if info, err := c.Job(ctx, n); err != nil || string(info.State) != want {
			t.Errorf("job %d after the command: %v %v, want %s", n, info, err, want)
		}
	}
	for _, fn := range []func(context.Context, *env, []string) error{runRetry, runDiscard} {
		if _, err := runCmd(fn, "--dsn", dsn, id(ids[0])); !errors.Is(err, bq.ErrJobNotFailed) {
			t.Errorf("a command on a ready job: %v, want ErrJobNotFailed", err)
		}
		if _, err := runCmd(fn, "--dsn", dsn, "abc"); !errors.Is(err, errUsage) {
			t.Errorf("a command on id abc: %v, want a usage error", err)
		}
	}
	if text, err := runCmd(runVersion); err != nil || !strings.HasPrefix(text, "bq ") || !strings.Contains(text, "go1.") {
		t.Errorf("bq version: %q, %v", text, err)
	}
}
