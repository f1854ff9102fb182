package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
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
