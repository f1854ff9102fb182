package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/bqueue/bq"
)

// runPolicy lists the stored queue policies. They are written by the
// application's SyncPolicies, not here: a policy set from a terminal would
// be undone by the next deploy.
func runPolicy(ctx context.Context, e *env, args []string) error {
	f := newFlagSet(e, "policy", "policy list --dsn DSN [--prefix bq_] [--json]",
		`"list" prints every queue's stored policy, as the application's
client.SyncPolicies wrote it: its namespace, MaxActive (claimed jobs of the
queue across the fleet), MaxActivePerKey (the concurrency limit of keyed
jobs that set none), MaxBlocked (a key's backlog cap), the default rate
of rated jobs that set none (MaxStartsPerKey per StartsPeriod), whether
its slots are shared fairly among its keys (FairShare: "yes", with the
KeyWeight of its keys that have no weight of their own when set), the
MaxWait of keyed jobs that set none (backpressure: a job expected to
wait longer for its slot is refused), whether their keys' limits adapt
(ADAPTIVE: "min N", the floor a throttled key falls to), and when it
last changed. A 0 or "-" is no limit. Change a policy in the code
that calls SyncPolicies; override one key at run time with
client.SetKeyLimit, bq rate set or bq weight set.`)
	var db dbFlags
	db.register(f)
	asJSON := f.Bool("json", false, "print as JSON")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "list" {
		return f.fail("want the action list, e.g. bq policy list --dsn DSN")
	}
	client, err := db.inspect(ctx, f)
	if err != nil {
		return err
	}
	defer client.Close()
	ps, err := client.ListPolicies(ctx)
	if err != nil {
		return fmt.Errorf("list policies: %w", err)
	}
	if *asJSON {
		return writeJSON(e.stdout, policiesJSON(ps))
	}
	printPolicies(e.stdout, ps, time.Now())
	return nil
}

// policyJSON is one stored policy as bq policy list --json prints it.
type policyJSON struct {
	Queue           string    `json:"queue"`
	Namespace       string    `json:"namespace"`
	MaxActive       int       `json:"max_active"`
	MaxActivePerKey int       `json:"max_active_per_key"`
	MaxBlocked      int       `json:"max_blocked"`
	MaxStartsPerKey int       `json:"max_starts_per_key"`
	StartsPeriodMS  int64     `json:"starts_period_ms"`
	FairShare       bool      `json:"fair_share"`
	KeyWeight       int       `json:"key_weight"`
	MaxWaitUS       int64     `json:"max_wait_us"`
	AdaptiveMin     int       `json:"adaptive_min"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
}

func policiesJSON(ps []bq.StoredPolicy) []policyJSON {
	out := make([]policyJSON, len(ps))
	for i, p := range ps {
		out[i] = policyJSON{Queue: p.Queue, Namespace: p.Namespace, MaxActive: p.MaxActive, MaxActivePerKey: p.MaxActivePerKey,
			MaxBlocked: p.MaxBlocked, MaxStartsPerKey: p.MaxStartsPerKey, StartsPeriodMS: p.StartsPeriod.Milliseconds(),
			FairShare: p.FairShare, KeyWeight: p.KeyWeight, MaxWaitUS: p.MaxWait.Microseconds(), CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
		if p.Adaptive != nil {
			out[i].AdaptiveMin = p.Adaptive.Min
		}
	}
	return out
}

func printPolicies(w io.Writer, ps []bq.StoredPolicy, now time.Time) {
	if len(ps) == 0 {
		fmt.Fprintln(w, "No queue policies are stored (client.SyncPolicies writes them).")
		return
	}
	limit := func(n int) string {
		if n == 0 {
			return "-"
		}
		return strconv.Itoa(n)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tNAMESPACE\tMAX ACTIVE\tPER KEY\tMAX BLOCKED\tMAX WAIT\tRATE PER KEY\tFAIR SHARE\tADAPTIVE\tCHANGED")
	for _, p := range ps {
		rate := "-"
		if p.MaxStartsPerKey > 0 {
			rate = fmt.Sprintf("%d per %s", p.MaxStartsPerKey, p.StartsPeriod)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", term(p.Queue), term(p.Namespace), limit(p.MaxActive),
			limit(p.MaxActivePerKey), limit(p.MaxBlocked), maxWaitCell(p.MaxWait), rate, fairShareCell(p.Policy),
			adaptiveCell(p.Adaptive), ago(p.UpdatedAt, now))
	}
	tw.Flush()
}

// maxWaitCell is the MAX WAIT column: "-" or the bound.
func maxWaitCell(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.String()
}

// adaptiveCell is the ADAPTIVE column: "-" or "min 2", the floor of the
// queue's adaptive keys.
func adaptiveCell(a *bq.Adaptive) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprintf("min %d", a.Min)
}

// fairShareCell is the FAIR SHARE column: "-", "yes", or "yes, weight 3"
// when the policy gives its keys a KeyWeight.
func fairShareCell(p bq.Policy) string {
	switch {
	case !p.FairShare:
		return "-"
	case p.KeyWeight > 0:
		return fmt.Sprintf("yes, weight %d", p.KeyWeight)
	}
	return "yes"
}
