package bq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// A key in the wrong form is refused naming the right one:
// WithConcurrencyKey and WithRateKey take the bare key (they add the
// Group), KeyLimit, SetKeyLimit and SetKeyRate the full one.
func TestKeyForms(t *testing.T) {
	ctx := context.Background()
	c := openMemory(t)
	noop := func(context.Context, struct{}) error { return nil }
	plain := Define("keyform.export", noop, JobOptions[struct{}]{})
	grouped := Define("keyform.grouped", noop, JobOptions[struct{}]{
		Concurrency: &Concurrency[struct{}]{Key: func(struct{}) string { return "" }, Group: "tenant"},
		Rate:        &Rate[struct{}]{Key: func(struct{}) string { return "" }, Limit: 1, Period: time.Second, Group: "api"},
	})
	for _, tc := range []struct {
		name string
		job  *Job[struct{}]
		opt  EnqueueOption
		want string // "" for accepted
	}{
		{"KeyLimit bare", plain, WithMoreConcurrencyKeys(KeyLimit{Key: "acme", To: 1}),
			`KeyLimit.Key "acme" has no group: KeyLimit takes a full key, bq.Key(group, key), as SetKeyLimit does: bq.Key("keyform.export", "acme") (WithConcurrencyKey and WithRateKey take the bare key and add the Group)`},
		{"KeyLimit full", plain, WithMoreConcurrencyKeys(KeyLimit{Key: "provider/hubspot", To: 1}), ""},
		{"WithConcurrencyKey full", plain, WithConcurrencyKey("keyform.export/acme", 2),
			`WithConcurrencyKey("keyform.export/acme", 2): the key starts with its Group, "keyform.export/": WithConcurrencyKey takes the bare key, "acme", and adds the Group (KeyLimit, SetKeyLimit and KeyState take the full key)`},
		{"WithConcurrencyKey full, Group", grouped, WithConcurrencyKey("tenant/acme", 2), `the key starts with its Group, "tenant/"`},
		{"WithConcurrencyKey another group's", grouped, WithConcurrencyKey("region/eu", 2), ""},
		{"WithConcurrencyKey bare", grouped, WithConcurrencyKey("acme", 2), ""},
		{"WithRateKey full", grouped, WithRateKey("api/stripe", 0, 0),
			`WithRateKey("api/stripe", 0, 0s): the key starts with its Group, "api/": WithRateKey takes the bare key, "stripe", and adds the Group (SetKeyRate and RateState take the full key)`},
		{"WithRateKey bare", grouped, WithRateKey("stripe", 0, 0), ""},
	} {
		_, err := tc.job.Enqueue(ctx, c, struct{}{}, tc.opt)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalidJob saying %q", tc.name, err, tc.want)
		}
	}
	for name, err := range map[string]error{
		"SetKeyLimit":   c.SetKeyLimit(ctx, "acme", 3),
		"ClearKeyLimit": c.ClearKeyLimit(ctx, "acme"),
		"SetKeyRate":    c.SetKeyRate(ctx, "acme", 3, time.Second),
		"ClearKeyRate":  c.ClearKeyRate(ctx, "acme"),
	} {
		want := name + `("acme"): the key has no group, so no job holds it: ` + name + ` takes a full key, Group + "/" + key, as bq status shows it: bq.Key(group, "acme")`
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s of a bare key: %v, want ErrInvalidArgument saying %q", name, err, want)
		}
	}
}
