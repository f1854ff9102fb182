package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/bqueue/bq"
)

var _ = register(
	scenario{"LongAndLookalikeKeys", testLongAndLookalikeKeys},
	scenario{"GroupSlashIsNoKeyBoundary", testGroupSlash},
)

var (
	// billingJob (group "c.billing") for tenant "charge/acme" and
	// billingChargeJob (group "c.billing/charge") for tenant "acme" would
	// both be "c.billing/charge/acme" were the group not escaped.
	billingJob = bq.Define("c.billing", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1}})
	billingChargeJob = bq.Define("c.billing/charge", behave, bq.JobOptions[Args]{
		Concurrency: &bq.Concurrency[Args]{Key: keyOf, To: 1}})
)

// testGroupSlash: a '/' in a Group (here, a job name used as the default
// Group) never makes two different keys one: the group is escaped in the
// full key, which stays readable, and bq.Key spells it the same way.
func testGroupSlash(t *testing.T, h *harness) {
	a := enqueue(t, h, billingChargeJob, Args{Key: "acme"})
	b := enqueue(t, h, billingJob, Args{Key: "charge/acme"})
	if a.State == bq.StateBlocked || b.State == bq.StateBlocked {
		t.Fatalf("group c.billing/charge, tenant acme: %+v; group c.billing, tenant charge/acme: %+v; want both ready (different keys)", a, b)
	}
	ka, kb := jobInfo(t, h, a.ID).Key, jobInfo(t, h, b.ID).Key
	if ka == kb || ka != "c.billing%2Fcharge/acme" || kb != "c.billing/charge/acme" {
		t.Errorf("full keys %q and %q, want c.billing%%2Fcharge/acme and c.billing/charge/acme", ka, kb)
	}
	if k := bq.Key("c.billing/charge", "acme"); k != ka {
		t.Errorf("bq.Key spells the key %q, the job %q", k, ka)
	}
	st, err := h.client.KeyState(context.Background(), ka)
	if err != nil || st.Group != "c.billing%2Fcharge" || st.Taken != 1 {
		t.Errorf("KeyState(%q): group %q, taken %d, %v; want group c.billing%%2Fcharge with 1 slot taken", ka, st.Group, st.Taken, err)
	}
}

// testLongAndLookalikeKeys: a key of 1,000 characters works like any
// other, stored whole; keys that differ only in case or a trailing space
// are different keys, each with its own limit.
func testLongAndLookalikeKeys(t *testing.T, h *harness) {
	long := strings.Repeat("ключ-", 200)
	if n := utf8.RuneCountInString(long); n != 1000 {
		t.Fatalf("test key has %d characters", n)
	}
	first := enqueue(t, h, limit1Job, Args{Key: long})
	second := enqueue(t, h, limit1Job, Args{Key: long})
	if first.State == bq.StateBlocked || second.State != bq.StateBlocked {
		t.Fatalf("two jobs of one 1,000-character key: %+v, %+v; want the second blocked", first, second)
	}
	if info := jobInfo(t, h, second.ID); info.Key != "c.limit1/"+long {
		t.Fatalf("stored key is %d bytes, want the full %d", len(info.Key), len("c.limit1/"+long))
	}
	for _, k := range []string{"look", "Look", "look ", "look\u00a0"} {
		if res := enqueue(t, h, limit1Job, Args{Key: k}); res.State == bq.StateBlocked {
			t.Errorf("key %q was blocked by a lookalike: keys compare byte for byte", k)
		}
	}
	// A key over bq.MaxKeyBytes is refused whole, never cut, on every
	// database (see KeysOneRule).
	huge := strings.Repeat("k", 10000)
	_, err := limit1Job.Enqueue(context.Background(), h.client, Args{Test: h.test, Key: huge})
	if !errors.Is(err, bq.ErrInvalidJob) || !strings.Contains(err.Error(), "bq.MaxKeyBytes") {
		t.Errorf("a 10,000-byte key: %v, want it refused naming bq.MaxKeyBytes", err)
	}
	worker(h, 4)
	h.waitState(second.ID, bq.StateCompleted)
	h.checkSemaphores()
}
