package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bqueue/bq"
	"github.com/bqueue/bq/internal/driver"
)

// TestExplainShowsExpectedStart: bq explain of a blocked job says when it
// is expected to start, from its place and its key's release interval,
// once one was measured, and says nothing of it before; bq status's most
// blocked keys show the interval and when the line clears.
func TestExplainShowsExpectedStart(t *testing.T) {
	ctx := context.Background()
	for _, db := range testDatabases(t) {
		t.Run(db.name, func(t *testing.T) {
			dsn, c := migratedClient(t, ctx, db)
			id := lastOfLine(t, c, 3) // a ready job and two blocked behind it (limit 1)
			if text, err := runCmd(runExplain, id, "--dsn", dsn); err != nil || strings.Contains(text, "xpected") {
				t.Errorf("bq explain with no release interval: %v, want no expected start\n%s", err, text)
			}
			if _, err := driver.ClientEngine(c).SQLDB().ExecContext(ctx, `UPDATE bq_semaphores SET release_interval_us = 240000`); err != nil {
				t.Fatal(err)
			}
			text, err := runCmd(runExplain, id, "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "It is expected to start in about 480ms (at ")
			wantIn(t, text, "its place in line, 2, × the key's recent release interval 240ms.")
			wantIn(t, text, "\nExpected start: ")
			wantIn(t, text, "place 2 × the key's recent release interval 240ms\n")
			text, err = runCmd(runStatus, "--dsn", dsn)
			if err != nil {
				t.Fatal(err)
			}
			wantIn(t, text, "BLOCKED  RELEASE INTERVAL  LINE CLEARS IN")
			if !slices.ContainsFunc(strings.Split(text, "\n"), func(l string) bool {
				return slices.Equal(strings.Fields(l), []string{"cli_test.inspect/a1", "1", "1", "0", "2", "240ms", "~480ms"})
			}) {
				t.Errorf("bq status does not show the key's release interval and when its line clears:\n%s", text)
			}
		})
	}
}

// lastOfLine enqueues n jobs of key cli_test.inspect/a1 (limit 1): one
// ready, the others blocked behind it; it returns the last one's id, as
// an argument to a command.
func lastOfLine(t *testing.T, c *bq.Client, n int) string {
	t.Helper()
	var last int64
	for range n {
		res, err := inspectJob.Enqueue(context.Background(), c, inspectArgs{Account: "a1"})
		if err != nil {
			t.Fatal(err)
		}
		last = res.ID
	}
	return strconv.FormatInt(last, 10)
}
