package bq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq"
)

type seqArgs struct{ K string }

func seqKey(a seqArgs) string { return a.K }

func runSeq(context.Context, seqArgs) error { return nil }

// TestSequenceDefinitionRefusals: a Sequence that cannot keep its promise
// is refused at Define, naming the problem and the fix.
func TestSequenceDefinitionRefusals(t *testing.T) {
	rate := &bq.Rate[seqArgs]{Key: seqKey, Limit: 1, Period: time.Second}
	for _, c := range []struct {
		name string
		opts bq.JobOptions[seqArgs]
		want string
	}{
		{"To 3", bq.JobOptions[seqArgs]{Concurrency: &bq.Concurrency[seqArgs]{Key: seqKey, To: 3, Sequence: true}}, "set To to 1"},
		{"Discard", bq.JobOptions[seqArgs]{Concurrency: &bq.Concurrency[seqArgs]{Key: seqKey, Sequence: true, OnConflict: bq.Discard}}, "use bq.Block"},
		{"Debounce", bq.JobOptions[seqArgs]{Concurrency: &bq.Concurrency[seqArgs]{Key: seqKey, Sequence: true, Debounce: time.Second}}, "drop one of them"},
		{"halt alone", bq.JobOptions[seqArgs]{Concurrency: &bq.Concurrency[seqArgs]{Key: seqKey, SequenceHaltOnFailure: true}}, "set Sequence too"},
		{"more keys", bq.JobOptions[seqArgs]{Concurrency: &bq.Concurrency[seqArgs]{Key: seqKey, Sequence: true},
			MoreConcurrency: []bq.Concurrency[seqArgs]{{Key: seqKey, Group: "other"}}}, "drop the further keys"},
		{"rate", bq.JobOptions[seqArgs]{Concurrency: &bq.Concurrency[seqArgs]{Key: seqKey, Sequence: true}, Rate: rate}, "drop Rate"},
	} {
		err := bq.Define("seq."+strings.ReplaceAll(c.name, " ", "_"), runSeq, c.opts).Err()
		if !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidJob saying %q", c.name, err, c.want)
		}
	}
	ok := bq.Define("seq.ok", runSeq, bq.JobOptions[seqArgs]{Concurrency: &bq.Concurrency[seqArgs]{Key: seqKey, To: 1, Sequence: true, SequenceHaltOnFailure: true}})
	if err := ok.Err(); err != nil {
		t.Errorf("a sequence with To 1 that halts: %v, want it accepted", err)
	}
}
