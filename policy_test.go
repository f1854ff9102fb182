package bq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// A policy's default rate takes both fields or neither, within the
// bounds and wording of a job's Rate, and names the fix.
func TestValidatePolicyRate(t *testing.T) {
	for _, tc := range []struct {
		limit  int
		period time.Duration
		want   []string // "" for valid
	}{
		{0, 0, nil},
		{1, time.Millisecond, nil},
		{MaxRateLimit, time.Hour, nil},
		{0, time.Second, []string{`queue "q": Policy MaxStartsPerKey is 0: use 1 to 10000 starts per period`, "both to 0"}},
		{5, 0, []string{"StartsPeriod is 0: set it to the window the 5 starts count in, e.g. time.Second for 5 starts a second"}},
		{-1, time.Second, []string{"MaxStartsPerKey is -1"}},
		{MaxRateLimit + 1, time.Second, []string{"at most 10000 starts per period (bq.MaxRateLimit)"}},
		{3, 1500 * time.Microsecond, []string{"StartsPeriod is 1.5ms: use whole milliseconds"}},
	} {
		err := validatePolicies("ns", []Policy{{Queue: "q", MaxStartsPerKey: tc.limit, StartsPeriod: tc.period}})
		if tc.want == nil {
			if err != nil {
				t.Errorf("%d per %s: %v, want valid", tc.limit, tc.period, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%d per %s: %v, want ErrInvalidArgument", tc.limit, tc.period, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%d per %s: %q, want it to say %q", tc.limit, tc.period, err, w)
			}
		}
	}
}

// A Rate with Limit and Period both 0 leaves the rate to the policy; one
// without the other is refused.
func TestValidateRateSpecPolicyDefault(t *testing.T) {
	key := func(struct{}) string { return "k" }
	if err := validateRateSpec(&Rate[struct{}]{Key: key}); err != nil {
		t.Errorf("Rate with no Limit and Period: %v, want valid (the policy's rate)", err)
	}
	for _, r := range []Rate[struct{}]{{Key: key, Limit: 2}, {Key: key, Period: time.Second}} {
		err := validateRateSpec(&r)
		if err == nil || !strings.Contains(err.Error(), "MaxStartsPerKey") {
			t.Errorf("Rate %d per %s: %v, want an error naming the policy default as the other fix", r.Limit, r.Period, err)
		}
	}
}

// A Rate's Adaptive needs a Min of 1 or more, at most its Limit; one
// left to the policy (no Limit) may adapt with any Min of 1 or more.
func TestValidateRateSpecAdaptive(t *testing.T) {
	key := func(struct{}) string { return "k" }
	for _, tc := range []struct {
		r    Rate[struct{}]
		want string
	}{
		{Rate[struct{}]{Key: key, Limit: 4, Period: time.Second, Adaptive: &Adaptive{Min: 0}}, "Rate.Adaptive.Min is 0: give the fewest starts per period"},
		{Rate[struct{}]{Key: key, Limit: 4, Period: time.Second, Adaptive: &Adaptive{Min: 5}}, "Rate.Adaptive.Min 5 is above Rate.Limit 4"},
		{Rate[struct{}]{Key: key, Limit: 4, Period: time.Second, Adaptive: &Adaptive{Min: 4}}, ""},
		{Rate[struct{}]{Key: key, Adaptive: &Adaptive{Min: 50}}, ""},
	} {
		err := validateRateSpec(&tc.r)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Rate %d per %s, Min %d: %v, want valid", tc.r.Limit, tc.r.Period, tc.r.Adaptive.Min, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Rate %d per %s, Min %d: %v, want it to say %q", tc.r.Limit, tc.r.Period, tc.r.Adaptive.Min, err, tc.want)
		}
	}
}

// A Rate with a Limit and no Period, as a definition or at enqueue, is
// refused naming the fix, not as "Period is 0s".
func TestRateLimitWithoutPeriod(t *testing.T) {
	key := func(struct{}) string { return "k" }
	const want = "Period is 0: set it to the window the 5 starts count in, e.g. time.Second for 5 starts a second"
	j := Define("rate.no-period", func(context.Context, struct{}) error { return nil }, JobOptions[struct{}]{Rate: &Rate[struct{}]{Key: key, Limit: 5}})
	if err := j.Err(); err == nil || !strings.Contains(err.Error(), "Rate "+want) || strings.Contains(err.Error(), "0s") {
		t.Errorf("Rate{Limit: 5}: %v, want %q", err, want)
	}
	ok := Define("rate.period-at-enqueue", func(context.Context, struct{}) error { return nil }, JobOptions[struct{}]{})
	_, err := ok.Enqueue(context.Background(), openMemory(t), struct{}{}, WithRateKey("k", 5, 0))
	if err == nil || !strings.Contains(err.Error(), "WithRateKey "+want) {
		t.Errorf("WithRateKey(k, 5, 0): %v, want %q", err, want)
	}
}

// A rate that throttles lowered (its key_adapt row, under its line key)
// reports the lowered limit in RateState and ListRates, with Adaptive
// naming the rate key; with no row it reports its own.
func TestRateStateShowsTheAdaptedRate(t *testing.T) {
	ctx := context.Background()
	c := openMemory(t)
	j := Define("rate.adapted", func(context.Context, struct{}) error { return nil }, JobOptions[struct{}]{
		Rate: &Rate[struct{}]{Key: func(struct{}) string { return "k" }, Limit: 6, Period: time.Second, Adaptive: &Adaptive{Min: 1}}})
	if _, err := j.Enqueue(ctx, c, struct{}{}); err != nil {
		t.Fatal(err)
	}
	key := Key("rate.adapted", "k")
	if r, err := c.RateState(ctx, key); err != nil || r.Limit != 6 || r.Adaptive != nil {
		t.Fatalf("RateState before any throttle: %+v, %v; want limit 6, not adapted", r, err)
	}
	if err := c.drv.Exec().KeyAdaptSet(ctx, driver.KeyAdapt{Key: driver.RateLine(key), Limit: 2, Min: 1, Successes: 1, AdaptedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	r, err := c.RateState(ctx, key)
	if err != nil || r.Limit != 2 || r.Adaptive == nil || r.Adaptive.Key != key || !r.Adaptive.Rate || r.Adaptive.Successes != 1 {
		t.Fatalf("RateState of a lowered rate: %+v (adaptive %+v), %v; want limit 2, adaptive of %s marked Rate", r, r.Adaptive, err, key)
	}
	list, err := c.ListRates(ctx, "", 10)
	if err != nil || len(list) != 1 || list[0].Limit != 2 || list[0].Adaptive == nil {
		t.Errorf("ListRates: %+v, %v; want the rate at 2, adapted", list, err)
	}
}

// TestValidatePolicyBounds: SyncPolicies refuses a negative MaxWait or
// one of less than whole microseconds, and an Adaptive whose Min is
// below 1 or above MaxActivePerKey, naming the fix; the rest is valid.
func TestValidatePolicyBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Policy
		want []string
	}{
		{"MaxWait 2m", Policy{MaxWait: 2 * time.Minute}, nil},
		{"MaxWait 1500us", Policy{MaxWait: 1500 * time.Microsecond}, nil},
		{"negative MaxWait", Policy{MaxWait: -time.Second}, []string{`queue "q": MaxWait -1s`, "positive duration of whole microseconds", "0 for no bound"}},
		{"MaxWait below a microsecond", Policy{MaxWait: 1500 * time.Nanosecond}, []string{"MaxWait 1.5µs", "whole microseconds"}},
		{"Adaptive Min 2", Policy{Adaptive: &Adaptive{Min: 2}}, nil},
		{"Adaptive Min at MaxActivePerKey", Policy{MaxActivePerKey: 3, Adaptive: &Adaptive{Min: 3}}, nil},
		{"Adaptive Min 0", Policy{Adaptive: &Adaptive{}}, []string{"Adaptive.Min 0", "use 1 or more", "leave Adaptive nil"}},
		{"Adaptive Min -1", Policy{Adaptive: &Adaptive{Min: -1}}, []string{"Adaptive.Min -1", "use 1 or more"}},
		{"Adaptive Min above MaxActivePerKey", Policy{MaxActivePerKey: 3, Adaptive: &Adaptive{Min: 4}},
			[]string{"Adaptive.Min 4 is above MaxActivePerKey 3", "set Min at most 3"}},
	} {
		tc.p.Queue = "q"
		err := validatePolicies("ns", []Policy{tc.p})
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want valid", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q, want it to say %q", tc.name, err, w)
			}
		}
	}
}
