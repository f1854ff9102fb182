package bq

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/drivers/sqlite"
)

type itemArgs struct {
	Tenant string
	N      float64
}

var (
	itemJob = Define("item.job", func(context.Context, itemArgs) error { return nil }, JobOptions[itemArgs]{
		Queue: "items", Priority: 1, MaxAttempts: 3,
		Concurrency: &Concurrency[itemArgs]{Key: func(a itemArgs) string { return a.Tenant }, To: 2, Group: "item.tenants"}})
	itemOther = Define("item.other", func(context.Context, itemArgs) error { return nil }, JobOptions[itemArgs]{})
	// itemInvalid's definition is refused (a negative MaxAttempts).
	itemInvalid = Define("item.invalid", func(context.Context, itemArgs) error { return nil }, JobOptions[itemArgs]{MaxAttempts: -1})
)

// storedCount is how many jobs the client's database holds.
func storedCount(t *testing.T, c *Client) int {
	t.Helper()
	var n int
	if err := c.Driver().(*sqlite.Driver).DB().QueryRow(`SELECT count(*) FROM bq_jobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An item carries its options through the code a single Enqueue uses: for
// each set of options, the job EnqueueBatch stores reads back the same as
// the one Enqueue stores (queue, priority, key, limit, run-at, attempts).
func TestItemStoresWhatEnqueueStores(t *testing.T) {
	ctx := context.Background()
	c := openMemory(t)
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for _, tc := range []struct {
		name string
		args itemArgs
		opts []EnqueueOption
	}{
		{"the definition's defaults", itemArgs{Tenant: "acme"}, nil},
		{"no key", itemArgs{}, nil},
		{"priority and queue", itemArgs{Tenant: "acme"}, []EnqueueOption{Priority(7), Queue("other")}},
		{"a key of its own", itemArgs{Tenant: "acme"}, []EnqueueOption{WithConcurrencyKey("tenant:zeta", 3, Discard)}},
		{"at", itemArgs{Tenant: "acme"}, []EnqueueOption{At(at)}},
		{"in", itemArgs{Tenant: "acme"}, []EnqueueOption{In(time.Hour)}},
	} {
		single, err := itemJob.Enqueue(ctx, c, tc.args, tc.opts...)
		if err != nil {
			t.Fatalf("%s: Enqueue: %v", tc.name, err)
		}
		batch, err := c.EnqueueBatch(ctx, []Item{itemOther.Item(itemArgs{}), itemJob.Item(tc.args, tc.opts...)})
		if err != nil || len(batch) != 2 {
			t.Fatalf("%s: EnqueueBatch: %+v, %v", tc.name, batch, err)
		}
		if batch[1].State != single.State {
			t.Errorf("%s: the item is %s, the single enqueue %s", tc.name, batch[1].State, single.State)
		}
		want, got := jobOf(t, c, single.ID), jobOf(t, c, batch[1].ID)
		if got.Kind != want.Kind || got.Queue != want.Queue || got.Priority != want.Priority || got.Key != want.Key ||
			got.Limit != want.Limit || got.MaxAttempts != want.MaxAttempts || string(got.Args) != string(want.Args) ||
			got.ScheduledAt.Sub(want.ScheduledAt).Abs() > time.Second {
			t.Errorf("%s: the item stored\n%+v\nthe single enqueue\n%+v", tc.name, got, want)
		}
		if other := jobOf(t, c, batch[0].ID); other.Kind != "item.other" || other.Queue != "default" {
			t.Errorf("%s: the other kind's item stored %+v", tc.name, other)
		}
	}
}

func jobOf(t *testing.T, c *Client, id int64) *JobInfo {
	t.Helper()
	info, err := c.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// Any bad item refuses the whole batch before the database, naming the
// item's index and the fix; nothing is stored. EnqueueManyTx refuses bad
// args the same way.
func TestEnqueueBatchRefusesABadItem(t *testing.T) {
	ctx := context.Background()
	c := openMemory(t)
	good := itemJob.Item(itemArgs{Tenant: "acme"})
	var nilJob *Job[itemArgs]
	for _, tc := range []struct {
		name string
		bad  Item
		want []string
	}{
		{"the zero Item", Item{}, []string{"items[1] is the zero bq.Item", "Item method"}},
		{"a bad key", itemJob.Item(itemArgs{Tenant: "\xff"}), []string{"items[1]", `"item.job"`, "not valid UTF-8", "hash"}},
		{"a bad queue", itemJob.Item(itemArgs{}, Queue("no spaces")), []string{"items[1]", "bq.Queue option", "ASCII letters"}},
		{"args that do not encode", itemJob.Item(itemArgs{N: math.NaN()}), []string{"items[1]", "encode args as JSON", "encoding/json"}},
		{"an invalid definition", itemInvalid.Item(itemArgs{}), []string{"items[1]", `"item.invalid"`, "MaxAttempts is -1"}},
		{"a nil option", itemJob.Item(itemArgs{}, nil), []string{"items[1]", "option 0 is nil"}},
		{"a nil job", nilJob.Item(itemArgs{}), []string{"items[1]", "the job is nil"}},
		{"a negative limit", itemJob.Item(itemArgs{}, WithConcurrencyKey("k", -1)), []string{"items[1]", "To is -1"}},
	} {
		res, err := c.EnqueueBatch(ctx, []Item{good, tc.bad, good})
		if err == nil || !errors.Is(err, ErrInvalidJob) {
			t.Errorf("%s: %+v, %v; want ErrInvalidJob", tc.name, res, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
	tx, err := c.Driver().(*sqlite.Driver).DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = itemJob.EnqueueManyTx(ctx, c, sqlite.Tx(tx), []itemArgs{{Tenant: "a"}, {N: math.Inf(1)}})
	if err == nil || !strings.Contains(err.Error(), "args[1]") || !errors.Is(err, ErrInvalidJob) {
		t.Errorf("EnqueueManyTx with args that do not encode: %v; want ErrInvalidJob naming args[1]", err)
	}
	if _, err := c.EnqueueBatchTx(ctx, sqlite.Tx(tx), []Item{good, {}}); err == nil {
		t.Error("EnqueueBatchTx with a zero Item: no error")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := storedCount(t, c); n != 0 {
		t.Errorf("%d jobs stored by refused batches", n)
	}
}

// An empty batch asks nothing of the database: it succeeds even without a
// client. A bad transaction is refused all the same, naming the call.
func TestEnqueueBatchEmpty(t *testing.T) {
	ctx := context.Background()
	var none *Client
	if res, err := none.EnqueueBatch(ctx, nil); res != nil || err != nil {
		t.Errorf("EnqueueBatch of nothing: %v, %v", res, err)
	}
	if res, err := itemJob.EnqueueMany(ctx, none, []itemArgs{}); res != nil || err != nil {
		t.Errorf("EnqueueMany of nothing: %v, %v", res, err)
	}
	c := openMemory(t)
	for call, err := range map[string]error{
		"EnqueueBatchTx": func() error { _, err := c.EnqueueBatchTx(ctx, nil, nil); return err }(),
		"EnqueueManyTx":  func() error { _, err := itemJob.EnqueueManyTx(ctx, c, nil, nil); return err }(),
	} {
		want := call + ": the transaction is nil"
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "or use "+strings.TrimSuffix(call, "Tx")) {
			t.Errorf("%s with a nil transaction: %v, want %q", call, err, want)
		}
	}
	if _, err := c.EnqueueBatch(ctx, []Item{}); err != nil {
		t.Error(err)
	}
	if n := storedCount(t, c); n != 0 {
		t.Errorf("%d jobs stored by empty batches", n)
	}
}

// Options added by other items of the issue ride on batch items too:
// metadata and tags are stored, and a unique item whose twin is in the
// same batch or already stored is a duplicate of it.
func TestItemCarriesMetadataTagsAndUnique(t *testing.T) {
	ctx := context.Background()
	c := openMemory(t)
	u := WithUnique(Unique{ByArgs: true})
	res, err := c.EnqueueBatch(ctx, []Item{
		itemJob.Item(itemArgs{Tenant: "acme"}, WithMetadata(map[string]string{"tenant": "acme"}), WithTags("nightly")),
		itemOther.Item(itemArgs{Tenant: "u"}, u),
		itemOther.Item(itemArgs{Tenant: "u"}, u),
	})
	if err != nil {
		t.Fatal(err)
	}
	info := jobOf(t, c, res[0].ID)
	if info.Metadata["tenant"] != "acme" || len(info.Tags) != 1 || info.Tags[0] != "nightly" {
		t.Errorf("metadata %v, tags %v; want tenant=acme, [nightly]", info.Metadata, info.Tags)
	}
	if res[1].Duplicate || res[1].ID == 0 || !res[2].Duplicate || res[2].DuplicateOf != res[1].ID {
		t.Errorf("unique twins in one batch: %+v, %+v; want the second a duplicate of the first", res[1], res[2])
	}
	again, err := c.EnqueueBatch(ctx, []Item{itemOther.Item(itemArgs{Tenant: "u"}, u)})
	if err != nil || !again[0].Duplicate || again[0].DuplicateOf != res[1].ID {
		t.Errorf("unique item of a stored job: %+v, %v; want a duplicate of %d", again, err, res[1].ID)
	}
}
