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
	// fleetMedianJain is the median index against shares of every
	// slot, idle ones included.
	fleetMedianJain float64
	// idle is the fraction of slot-time that idled while jobs waited to
	// start.
	idle float64
}

// judgeShares judges fair share from the runs' own records. Tenant k
// enqueued totals[k] jobs at arrived[k]; at an instant its demand is
// what it has left (enqueued, not yet ended), and its share is its part
// of the slots in use at that instant, water-filled over the tenants
// with demand (equal weights, none above its demand). Every 100 ms while
// at least two tenants have demand and it exceeds the slots (contended),
// not within a run time of an arrival (a slot frees within a run time),
// Jain's index of running against share is sampled, taken against the
// index of the fairest split of those slots (below 1 when they do not
// split evenly: 7 slots among 10 tenants score 0.7 at best): whether
// the slots that ran went to the tenants in their shares.
//
// Slots that idled are judged apart: every 10 ms, the slots idle while
// jobs waited to start are counted. Sharing every slot of the fleet
// instead mixes the two: on a starved machine, where the fleet stalls
// with half its slots idle, a scheduler that hands every claim to the
// right tenant scores 0.3-0.7 in those samples. fleetMedianJain keeps
// that mixed index, to print beside.
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
	var all, fleet []float64
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
		inUse := 0
		for _, n := range running {
			inUse += n
		}
		if inUse == 0 {
			continue // nothing ran to judge; the idle count has it
		}
		share := waterFill(demand, inUse)
		j := jain(running, share) / jain(bestSplit(share, demand, inUse), share)
		fleet = append(fleet, jain(running, waterFill(demand, slots)))
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
		slices.Sort(fleet)
		out.fleetMedianJain = fleet[len(fleet)/2]
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

// jain is Jain's fairness index of the running slots against the shares:
// 1 when every tenant runs its share, 1/n when one of n runs them all.
func jain(running map[string]int, share map[string]float64) float64 {
	var sx, sxx float64
	for k, s := range share {
		x := float64(running[k]) / s
		sx += x
		sxx += x * x
	}
	if sxx == 0 {
		return 1
	}
	return sx * sx / (float64(len(share)) * sxx)
}

// bestSplit is the fairest split of n whole slots: one at a time, each
// to the tenant with demand left that is furthest below its share. Below
// one slot per tenant even the fairest split scores under 1 (7 slots in
// use among 10 tenants: 0.7), so a sample's index is taken against it.
func bestSplit(share map[string]float64, demand map[string]int, n int) map[string]int {
	split := map[string]int{}
	for range n {
		pick, least := "", math.Inf(1)
		for k, s := range share {
			if split[k] < demand[k] && (float64(split[k])+1)/s < least {
				pick, least = k, (float64(split[k])+1)/s
			}
		}
		if pick == "" {
			break
		}
		split[pick]++
	}
	return split
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
