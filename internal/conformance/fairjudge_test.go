package conformance

import (
	"fmt"
	"math"
	"os"
	"slices"
	"time"
)

// debugShares (BQ_DEBUG_SHARES set) prints each sample judgeShares takes.
var debugShares = os.Getenv("BQ_DEBUG_SHARES") != ""

// shares is what judgeShares found.
type shares struct {
	meanJain, medianJain, minJain float64
	samples                       int
	// idle is the fraction of slot-time that idled while jobs waited to
	// start.
	idle float64
}

// judgeShares judges fair share from the runs' own records. Tenant k
// enqueued totals[k] jobs at arrived[k]; at an instant its demand is
// what it has left (enqueued, not yet ended), and its share is its part
// of slots, water-filled over the tenants with demand (equal weights,
// none above its demand). Every 100 ms while at least two tenants have
// demand and it exceeds the slots (contended), not within a run time of an
// arrival (a slot frees within a run time), Jain's index of running
// against share is sampled. Every 10 ms, the slots idle while jobs
// waited to start are counted.
func judgeShares(runs []run, arrived map[string]time.Time, totals map[string]int, slots int, runTime time.Duration) shares {
	from, to := time.Time{}, time.Time{}
	for _, at := range arrived {
		if from.IsZero() || at.Before(from) {
			from = at
		}
	}
	for _, r := range runs {
		to = maxTime(to, r.End)
	}
	state := func(at time.Time) (demand, running map[string]int) {
		demand, running = map[string]int{}, map[string]int{}
		for k, a := range arrived {
			if !a.After(at) {
				demand[k] = totals[k]
			}
		}
		for _, r := range runs {
			if !r.End.After(at) {
				demand[r.Key]--
			} else if !r.Start.After(at) {
				running[r.Key]++
			}
		}
		return demand, running
	}
	var out shares
	out.minJain = 1
	var sum float64
	var all []float64
	for at := from; at.Before(to); at = at.Add(100 * time.Millisecond) {
		if justArrived(arrived, at, runTime) {
			continue
		}
		demand, running := state(at)
		total, busy := 0, 0
		for _, d := range demand {
			total += d
			if d > 0 {
				busy++
			}
		}
		if busy < 2 || total <= slots {
			continue
		}
		share := waterFill(demand, slots)
		var sx, sxx float64
		for k, s := range share {
			x := float64(running[k]) / s
			sx += x
			sxx += x * x
		}
		j := 1.0
		if sxx > 0 {
			j = sx * sx / (float64(len(share)) * sxx)
		}
		sum += j
		all = append(all, j)
		if debugShares {
			fmt.Printf("at %v: running %v share %v demand %v jain %.3f\n", at.Sub(from).Round(time.Millisecond), running, share, demand, j)
		}
		out.samples++
		out.minJain = math.Min(out.minJain, j)
	}
	if out.samples > 0 {
		out.meanJain = sum / float64(out.samples)
		slices.Sort(all)
		out.medianJain = all[len(all)/2]
	}
	var idle, offered float64
	for at := from; at.Before(to); at = at.Add(10 * time.Millisecond) {
		demand, running := state(at)
		waiting, run := 0, 0
		for k, d := range demand {
			waiting += d - running[k]
			run += running[k]
		}
		if waiting > 0 {
			idle += float64(min(slots-run, waiting))
			offered += float64(slots)
		}
	}
	if offered > 0 {
		out.idle = idle / offered
	}
	return out
}

// justArrived reports whether a tenant arrived within a run time
// before at.
func justArrived(arrived map[string]time.Time, at time.Time, runTime time.Duration) bool {
	for _, a := range arrived {
		if !a.After(at) && at.Sub(a) < runTime {
			return true
		}
	}
	return false
}

// waterFill splits slots among the keys with demand, equally, none above
// its demand, what a capped key leaves going to the others.
func waterFill(demand map[string]int, slots int) map[string]float64 {
	share := map[string]float64{}
	open := map[string]bool{}
	for k, d := range demand {
		if d > 0 {
			open[k] = true
		}
	}
	left := float64(slots)
	for len(open) > 0 {
		each := left / float64(len(open))
		capped := false
		for k := range open {
			if float64(demand[k]) <= each {
				share[k] = float64(demand[k])
				left -= share[k]
				delete(open, k)
				capped = true
			}
		}
		if !capped {
			for k := range open {
				share[k] = each
			}
			break
		}
	}
	return share
}
