package conformance

import (
	"testing"
)

var _ = register(
	scenario{"ArgsComeBackExactly", testArgsComeBackExactly},
)

// testArgsComeBackExactly: a job's args are stored as the JSON they were
// enqueued as; numbers beyond 64 bits keep every digit.
func testArgsComeBackExactly(t *testing.T, h *harness) {
	const args = `{"Big": 123456789012345678901234567890.123456789, "Text": "ключ 🔑"}`
	id := insertRaw(t, h, "c.args", args)
	if got := string(jobInfo(t, h, id).Args); got != args {
		t.Errorf("args came back as %s, want %s", got, args)
	}
}
