package bq

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

type inboxInner struct {
	City string `json:"city"`
	Zip  string `json:"zip,omitempty"`
}

type inboxOuter struct {
	Name  string      `json:"name"`
	Home  inboxInner  `json:"home"`
	Work  *inboxInner `json:"work"`
	When  time.Time   `json:"when"`
	Note  string      `json:"note,omitempty"`
	Plain int
}

// requireFields refuses args that lack a field json.Marshal would write,
// at any depth, naming it; what marshals itself and what may be left out
// are not asked for.
func TestRequireFields(t *testing.T) {
	const full = `"name":"a","home":{"city":"x"},"work":null,"when":"2030-01-01T00:00:00Z","plain":1`
	for _, c := range []struct{ args, missing string }{
		{`{` + full + `}`, ""},
		{`{` + strings.Replace(full, `"plain":1`, `"PLAIN":1`, 1) + `}`, ""}, // case folded, as encoding/json does
		{`{` + strings.Replace(full, `"name":"a",`, ``, 1) + `}`, `"name" (inboxOuter.Name)`},
		{`{` + strings.Replace(full, `"home":{"city":"x"}`, `"home":{}`, 1) + `}`, `"city" (inboxOuter.Home.City)`},
		{`{` + strings.Replace(full, `"work":null`, `"work":{"zip":"1"}`, 1) + `}`, `"city" (inboxOuter.Work.City)`},
		{`{` + strings.Replace(full, `,"plain":1`, ``, 1) + `}`, `"Plain" (inboxOuter.Plain)`},
	} {
		err := requireFields([]byte(c.args), reflect.TypeFor[inboxOuter]())
		switch {
		case c.missing == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.args, err)
		case c.missing != "" && (err == nil || !strings.Contains(err.Error(), c.missing)):
			t.Errorf("%s: %v, want the missing field %s named", c.args, err, c.missing)
		}
	}
}

// Options JSON: each field read as its EnqueueOption; the bad ones refused
// naming the field.
func TestInboxOptionsOf(t *testing.T) {
	opts, err := inboxOptionsOf([]byte(`{"queue":"q","priority":3,"run_in_ms":1500,"concurrency_key":{"key":"k","to":2,"on_conflict":"discard"},
		"more_concurrency_keys":[{"key":"g/m","to":1}],"rate_key":{"key":"r","limit":5,"period_ms":1000},
		"unique":{"by_args":true,"by_period_ms":60000,"by_states":["ready"]},"metadata":{"a":"b"},"tags":["t"]}`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := applyOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	if *o.queue != "q" || *o.priority != 3 || o.in != 1500*time.Millisecond || o.key.key != "k" || o.key.to != 2 ||
		*o.key.onConflict != Discard || (*o.more)[0].Key != "g/m" || o.rate.limit != 5 || o.rate.period != time.Second ||
		!o.unique.ByArgs || o.unique.ByPeriod != time.Minute || o.unique.ByStates[0] != StateReady ||
		o.metadata["a"] != "b" || o.tags[0] != "t" {
		t.Errorf("options read as %+v", o)
	}
	for raw, want := range map[string]string{
		`{"prio":1}`: `unknown field "prio"`,
		`{"run_at":"2030-01-01T00:00:00Z","run_in_ms":1}`:             "run_at and run_in_ms are both set",
		`{"concurrency_key":{"key":"k","on_conflict":"wait"}}`:        `concurrency_key.on_conflict is "wait"`,
		`{"more_concurrency_keys":[{"key":"g/k","on_conflict":"x"}]}`: `more_concurrency_keys[0].on_conflict`,
		`{"priority":"high"}`: "priority",
		`{} {}`:               "more than one JSON value",
	} {
		if _, err := inboxOptionsOf([]byte(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", raw, err, want)
		}
	}
}
