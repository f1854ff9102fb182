package main

import (
	"context"
	"fmt"
	"time"

	"github.com/bqueue/bq"
)

// The demo's second part: fair share. The large tenant's backlog fills
// every slot of queue "shared" while it is alone; the small tenants,
// arriving later, get their turn at once and share the slots with it.
const (
	demoShareQueue = "shared"
	demoShareLarge = 60 // acme's shares, enqueued first
	demoShareSmall = 9  // each small tenant's, enqueued demoShareAfter later
	demoShareAfter = 700 * time.Millisecond
	demoShareSlots = demoWorkers * demoSlots
)

type shareArgs struct {
	Tenant string `json:"tenant"`
	N      int    `json:"n"`
}

// defineDemoShare defines the fair-share part's kind (demoKinds): it may
// use every slot of its queue for one tenant (To is the fleet's slots):
// the policy's fair share, not a limit, makes room for the others.
func defineDemoShare() *bq.Job[shareArgs] {
	return bq.Define("demo.share", func(ctx context.Context, a shareArgs) error {
		return demoRun.Load().rec.run(ctx, "share", a.Tenant, fmt.Sprintf("share #%d", a.N))
	}, bq.JobOptions[shareArgs]{
		Queue: demoShareQueue,
		Concurrency: &bq.Concurrency[shareArgs]{
			Key: func(a shareArgs) string { return a.Tenant },
			To:  demoShareSlots,
		},
	})
}

// fairShare runs the second part: the policy, acme's backlog, the workers,
// the small tenants 0.7 s later; then reports from the runs' records.
func (d *demo) fairShare(ctx context.Context) error {
	out, c := d.e.stdout, d.clients[0]
	fmt.Fprintf(out, "\nFair share: queue %q shares its %d slots among tenants (client.SyncPolicies, Policy{FairShare: true});\n", demoShareQueue, demoShareSlots)
	fmt.Fprintf(out, "a tenant alone may use every slot (To %d); each claim takes the tenant furthest below its share first.\n", demoShareSlots)
	if err := c.SyncPolicies(ctx, "demo", []bq.Policy{{Queue: demoShareQueue, FairShare: true}}); err != nil {
		return err
	}
	d.rec = &recorder{}
	d.rec.start()
	enqueued := map[string]time.Duration{}
	if err := d.enqueueShares(ctx, demoLarge, demoShareLarge, enqueued); err != nil {
		return err
	}
	err := d.runWorkers(ctx, func(ctx context.Context, errs <-chan error) error {
		return d.waitShares(ctx, errs, enqueued)
	})
	if err != nil {
		return err
	}
	d.reportShares(enqueued)
	return nil
}

func (d *demo) enqueueShares(ctx context.Context, tenant string, n int, at map[string]time.Duration) error {
	args := make([]shareArgs, n)
	for i := range args {
		args[i] = shareArgs{Tenant: tenant, N: i + 1}
	}
	at[tenant] = time.Since(d.rec.t0)
	if _, err := demoKinds().share.EnqueueMany(ctx, d.clients[0], args); err != nil {
		return err
	}
	fmt.Fprintf(d.e.stdout, "  %5.2fs  %-8s enqueues %d\n", at[tenant].Seconds(), tenant, n)
	return nil
}

// waitShares enqueues the small tenants' jobs demoShareAfter after the
// large one's, then waits until the queue has nothing live.
func (d *demo) waitShares(ctx context.Context, errs <-chan error, at map[string]time.Duration) error {
	small := true
	return d.poll(ctx, errs, "fair-share jobs", func() (bool, error) {
		if !small {
			return d.drained(ctx)
		}
		if time.Since(d.rec.t0) < demoShareAfter {
			return false, nil
		}
		small = false
		for _, t := range demoTenants[1:] {
			if err := d.enqueueShares(ctx, t, demoShareSmall, at); err != nil {
				return false, err
			}
		}
		return false, nil
	})
}

// reportShares says, from the runs' own records, how many slots acme used
// alone, how soon each small tenant started, and how the slots were
// shared while all three had work.
func (d *demo) reportShares(at map[string]time.Duration) {
	out := d.e.stdout
	runs := d.rec.snapshot()
	running := func(tenant string, t time.Duration) int {
		n := 0
		for _, r := range runs {
			if (tenant == "" || r.key == tenant) && r.start <= t && r.end > t {
				n++
			}
		}
		return n
	}
	arrived := at[demoTenants[1]]
	alone := 0
	for _, r := range runs {
		if r.start < arrived {
			alone = max(alone, running(demoLarge, r.start))
		}
	}
	every := fmt.Sprintf(" of %d slots (a loaded machine kept the workers from more)", demoShareSlots)
	if alone >= demoShareSlots {
		every = ": every slot"
	}
	fmt.Fprintf(out, "  %s alone ran up to %d at once%s.\n", demoLarge, alone, every)
	// Until the first small tenant has no job left: all three had work.
	until := time.Duration(1 << 62)
	for _, t := range demoTenants[1:] {
		first, last := time.Duration(1<<62), time.Duration(0)
		for _, r := range runs {
			if r.key == t {
				first, last = min(first, r.start), max(last, r.start)
			}
		}
		until = min(until, last)
		fmt.Fprintf(out, "  %-8s first started %3dms after its enqueue, beside %s's backlog.\n", t, (first - at[t]).Milliseconds(), demoLarge)
	}
	sums, samples := map[string]int{}, 0
	for t := arrived + 100*time.Millisecond; t < until; t += 10 * time.Millisecond {
		samples++
		for _, tenant := range demoTenants {
			sums[tenant] += running(tenant, t)
		}
	}
	if samples > 0 {
		fmt.Fprintf(out, "  While all three had work, running on average: ")
		for i, tenant := range demoTenants {
			if i > 0 {
				fmt.Fprint(out, ", ")
			}
			fmt.Fprintf(out, "%s %.1f", tenant, float64(sums[tenant])/float64(samples))
		}
		fmt.Fprintf(out, " of %d slots (an equal share is %.1f).\n", demoShareSlots, float64(demoShareSlots)/float64(len(demoTenants)))
	}
}
