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
)

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
	if first.Blocked || !second.Blocked {
		t.Fatalf("two jobs of one 1,000-character key: %+v, %+v; want the second blocked", first, second)
	}
	if info := jobInfo(t, h, second.ID); info.Key != "c.limit1/"+long {
		t.Fatalf("stored key is %d bytes, want the full %d", len(info.Key), len("c.limit1/"+long))
	}
	for _, k := range []string{"look", "Look", "look ", "look\u00a0"} {
		if res := enqueue(t, h, limit1Job, Args{Key: k}); res.Blocked {
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
