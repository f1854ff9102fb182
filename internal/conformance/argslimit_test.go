package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"ArgsSizeLimit", testArgsSizeLimit},
)

// blobArgs encode to len(Blob) + blobOverhead bytes of JSON.
type blobArgs struct {
	Key  string
	Blob string
}

const blobOverhead = len(`{"Key":"","Blob":""}`)

var blobJob = bq.Define("c.blob", func(context.Context, blobArgs) error { return nil }, bq.JobOptions[blobArgs]{
	Concurrency: &bq.Concurrency[blobArgs]{Key: func(a blobArgs) string { return a.Key }, To: 1}})

// blob returns args that encode to exactly n bytes.
func blob(key string, n int) blobArgs {
	return blobArgs{Key: key, Blob: strings.Repeat("x", n-blobOverhead-len(key))}
}

// testArgsSizeLimit: args of bq.MaxArgsBytes are stored and come back
// whole; one byte more is refused before the database (the caller's
// transaction is untouched, no semaphore is made), with the size, the
// limit and the fix in the error, on Enqueue, EnqueueMany and EnqueueTx
// alike — the same rule on every database.
func testArgsSizeLimit(t *testing.T, h *harness) {
	ctx := context.Background()
	if raw, _ := json.Marshal(blob("", bq.MaxArgsBytes)); len(raw) != bq.MaxArgsBytes {
		t.Fatalf("blob encodes to %d bytes, want %d", len(raw), bq.MaxArgsBytes)
	}
	atLimit := blob("", bq.MaxArgsBytes)
	res, err := blobJob.Enqueue(ctx, h.client, atLimit)
	if err != nil {
		t.Fatalf("args of exactly bq.MaxArgsBytes: %v", err)
	}
	var back blobArgs
	if err := json.Unmarshal(jobInfo(t, h, res.ID).Args, &back); err != nil || back != atLimit {
		t.Errorf("args of %d bytes came back changed (%d bytes of blob, %v)", bq.MaxArgsBytes, len(back.Blob), err)
	}

	over := bq.MaxArgsBytes + 1
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, bq.ErrInvalidJob) {
			t.Errorf("%s: %v, want ErrInvalidJob", what, err)
		}
		wantErr(t, err, fmt.Sprint(over), fmt.Sprint(bq.MaxArgsBytes), "bq.MaxArgsBytes", "reference")
	}
	_, err = blobJob.Enqueue(ctx, h.client, blob("", over))
	refused("Enqueue", err)
	_, err = blobJob.Enqueue(ctx, h.client, blob("tenant", over))
	refused("keyed Enqueue", err)
	_, err = blobJob.EnqueueMany(ctx, h.client, []blobArgs{blob("a", 100), blob("b", over)})
	refused("EnqueueMany", err)
	wantErr(t, err, "args[1]")

	// Refused before the database: the caller's transaction goes on.
	tx, commit := h.beginTx(ctx)
	_, err = blobJob.EnqueueTx(ctx, h.client, tx, blob("c", over))
	refused("EnqueueTx", err)
	if _, err := blobJob.EnqueueTx(ctx, h.client, tx, blob("c", 100)); err != nil {
		t.Errorf("the transaction is unusable after a refused enqueue: %v", err)
	}
	if err := commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}

	if n := h.count(`SELECT count(*) FROM bq_jobs`); n != 2 {
		t.Errorf("%d jobs stored, want 2 (the one at the limit and the small one of the transaction)", n)
	}
	if n := h.count(`SELECT count(*) FROM bq_semaphores WHERE key IN ('c.blob/tenant', 'c.blob/a', 'c.blob/b')`); n != 0 {
		t.Errorf("refused enqueues made %d semaphores", n)
	}
}
