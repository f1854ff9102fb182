package bq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

type trapArgs struct{ Tenant, Region string }

func trapNoop(context.Context, trapArgs) error { return nil }

func tenantOf(a trapArgs) string { return a.Tenant }

// field returns a key func reading one field: closures of one literal,
// each with a field of its own.
func field(name string) func(trapArgs) string {
	return func(a trapArgs) string {
		if name == "region" {
			return a.Region
		}
		return a.Tenant
	}
}

// Two limits of one kind with the same Group and the same Key func name
// the same key on every job, so every enqueue would be refused: Define
// refuses the kind instead. Closures of one literal with captures of
// their own, or another Group, are different keys and pass.
func TestDefineSameKeyTwice(t *testing.T) {
	shared := field("tenant")
	for _, tc := range []struct {
		name string
		opts JobOptions[trapArgs]
		want string // "" for valid
	}{
		{"one func", JobOptions[trapArgs]{Concurrency: &Concurrency[trapArgs]{Key: tenantOf, To: 2},
			MoreConcurrency: []Concurrency[trapArgs]{{Key: tenantOf, To: 5}}},
			`Concurrency and MoreConcurrency[0] have the same Group ("traps.one-func") and the same Key func: every job would name one key twice and be refused; give one of them a Group of its own (e.g. Group: "tenant") or another Key`},
		{"one closure", JobOptions[trapArgs]{MoreConcurrency: []Concurrency[trapArgs]{{Key: shared, To: 2, Group: "g"}, {Key: shared, To: 5, Group: "g"}}},
			`MoreConcurrency[0] and MoreConcurrency[1] have the same Group ("g") and the same Key func`},
		{"other groups", JobOptions[trapArgs]{Concurrency: &Concurrency[trapArgs]{Key: tenantOf, To: 2},
			MoreConcurrency: []Concurrency[trapArgs]{{Key: tenantOf, To: 5, Group: "tenant-wide"}}}, ""},
		{"closures of one literal", JobOptions[trapArgs]{Concurrency: &Concurrency[trapArgs]{Key: field("tenant"), To: 2},
			MoreConcurrency: []Concurrency[trapArgs]{{Key: field("region"), To: 5}}}, ""},
	} {
		j := Define("traps."+strings.ReplaceAll(tc.name, " ", "-"), trapNoop, tc.opts)
		switch err := j.Err(); {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalidJob saying %q", tc.name, err, tc.want)
		}
	}
}

// RequireKey refuses a job whose key for the limit is empty, which would
// otherwise run without it; without RequireKey an empty key still means
// no limit.
func TestRequireKey(t *testing.T) {
	ctx := context.Background()
	c := openMemory(t)
	strict := Define("traps.require-key", trapNoop, JobOptions[trapArgs]{
		Concurrency:     &Concurrency[trapArgs]{Key: tenantOf, To: 2, RequireKey: true},
		MoreConcurrency: []Concurrency[trapArgs]{{Key: field("region"), To: 5, Group: "region", RequireKey: true}},
		Rate:            &Rate[trapArgs]{Key: tenantOf, Limit: 10, Period: time.Second, Group: "api", RequireKey: true},
	})
	if err := strict.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args trapArgs
		opts []EnqueueOption
		want string // "" for accepted
	}{
		{"every key", trapArgs{Tenant: "acme", Region: "eu"}, nil, ""},
		{"no tenant", trapArgs{Region: "eu"}, nil,
			`Concurrency.Key returned an empty key and Concurrency.RequireKey is set: the job would run without the limit; return the key to limit by, or leave RequireKey unset for such jobs to run unlimited`},
		{"no region", trapArgs{Tenant: "acme"}, nil, `MoreConcurrency[0].Key returned an empty key and MoreConcurrency[0].RequireKey is set`},
		{"empty WithConcurrencyKey", trapArgs{Tenant: "acme", Region: "eu"}, []EnqueueOption{WithConcurrencyKey("", 2)},
			`WithConcurrencyKey gave an empty key and Concurrency.RequireKey is set`},
		{"empty WithRateKey", trapArgs{Tenant: "acme", Region: "eu"}, []EnqueueOption{WithRateKey("", 0, 0)},
			`WithRateKey gave an empty key and Rate.RequireKey is set`},
	} {
		_, err := strict.Enqueue(ctx, c, tc.args, tc.opts...)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalidJob saying %q", tc.name, err, tc.want)
		}
	}
	lax := Define("traps.lax-key", trapNoop, JobOptions[trapArgs]{Concurrency: &Concurrency[trapArgs]{Key: tenantOf, To: 2}})
	if res, err := lax.Enqueue(ctx, c, trapArgs{}); err != nil || res.State != StateReady {
		t.Errorf("an empty key without RequireKey: %+v, %v; want it ready, unlimited", res, err)
	}
}
