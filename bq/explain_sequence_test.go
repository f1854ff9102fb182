package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bqueue/bq"
)

// TestExplainPrintsSequence: bq explain says a job is a sequence's, and
// names a holder that keeps its place through a retry.
func TestExplainPrintsSequence(t *testing.T) {
	e := &bq.Explanation{
		Job:     &bq.JobInfo{ID: 2, Kind: "k", Queue: "q", State: bq.StateBlocked, Key: "g/a", Sequence: true},
		Summary: "Waiting for job 1 of the sequence",
		Key: &bq.KeyState{Key: "g/a", Exists: true, Limit: 1, Blocked: 1, Sequence: true,
			Holders: []bq.Holder{{JobID: 1, Kind: "k", Queue: "q", State: bq.StateScheduled}}},
	}
	var b bytes.Buffer
	if err := printExplanation(&b, e); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Sequence: key g/a runs its jobs one at a time in enqueue order", "scheduled (a sequence's retry, keeping its place)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("bq explain printed:\n%s\nwant it to contain %q", b.String(), want)
		}
	}
}
