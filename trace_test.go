package bq

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestWithTraceContext: the trace context joins a job's metadata; the
// caller's pairs win, and a job whose metadata would pass its limits with
// it keeps what it had rather than being refused.
func TestWithTraceContext(t *testing.T) {
	carrier := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	decode := func(raw []byte) map[string]string {
		t.Helper()
		var md map[string]string
		if err := json.Unmarshal(raw, &md); err != nil {
			t.Fatalf("metadata %q: %v", raw, err)
		}
		return md
	}
	if md := decode(withTraceContext(nil, carrier)); len(md) != 1 || md["traceparent"] != carrier["traceparent"] {
		t.Errorf("no metadata + trace context = %v", md)
	}
	mine, _ := encodeMetadata(map[string]string{"tenant": "acme", "traceparent": "mine"})
	if md := decode(withTraceContext(mine, carrier)); len(md) != 2 || md["traceparent"] != "mine" || md["tenant"] != "acme" {
		t.Errorf("the caller's traceparent was overwritten: %v", md)
	}
	other, _ := encodeMetadata(map[string]string{"tenant": "acme"})
	if md := decode(withTraceContext(other, carrier)); len(md) != 2 || md["traceparent"] == "" {
		t.Errorf("trace context not merged: %v", md)
	}
	full := map[string]string{}
	for i := range MaxMetadataEntries {
		full[fmt.Sprintf("k%d", i)] = "v"
	}
	raw, _ := encodeMetadata(full)
	if got := withTraceContext(raw, carrier); string(got) != string(raw) {
		t.Errorf("a full job's metadata changed to %s", got)
	}
	big, _ := encodeMetadata(map[string]string{"blob": strings.Repeat("x", MaxMetadataBytes-40)})
	if got := withTraceContext(big, carrier); string(got) != string(big) {
		t.Errorf("a job's metadata near MaxMetadataBytes grew past it: %d bytes", len(got))
	}
}
