package conformance

import (
	"context"
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
	// A key longer than a driver stores is refused whole, never cut.
	huge := strings.Repeat("k", 10000)
	res, err := limit1Job.Enqueue(context.Background(), h.client, Args{Test: h.test, Key: huge})
	switch {
	case err != nil && !strings.Contains(err.Error(), "bytes"):
		t.Errorf("a 10,000-byte key was refused without saying why: %v", err)
	case err == nil:
		if info := jobInfo(t, h, res.ID); info.Key != "c.limit1/"+huge {
			t.Errorf("a 10,000-byte key was stored as %d bytes", len(info.Key))
		}
	}
	worker(h, 4)
	h.waitState(second.ID, bq.StateCompleted)
	h.checkSemaphores()
}
