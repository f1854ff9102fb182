package main

import "strings"

// keyedBase is the unkeyed run keyed run id is divided by, "" for a run
// that is not keyed: the drain of the same database (keyed, keyed-second,
// keyed-fair, keyed-deep, keyed-fair-deep, hotkey), the drain across the same network for a network run
// (keyed-net, hotkey-net: drain-net), or for a fleet run the unkeyed fleet
// drain of as many processes (fleet-keyed-N, fleet-hotkey-N: fleet-N).
func keyedBase(id string) string {
	db, rest, ok := strings.Cut(id, "/bq/")
	if !ok {
		return ""
	}
	switch {
	case rest == "keyed" || rest == "keyed-second" || rest == "keyed-fair" || rest == "keyed-deep" || rest == "keyed-fair-deep" || rest == "hotkey":
		return db + "/bq/drain"
	case rest == "keyed-net" || rest == "hotkey-net":
		return db + "/bq/drain-net"
	case strings.HasPrefix(rest, "fleet-keyed-") || strings.HasPrefix(rest, "fleet-hotkey-"):
		return db + "/bq/fleet-" + rest[strings.LastIndex(rest, "-")+1:]
	}
	return ""
}

// keyedTable shows every keyed run that ran beside its unkeyed drain as
// a fraction of it, work and EnqueueMany, each ratio taken within a round.
func (r report) keyedTable() string {
	var rows [][]string
	work := func(r *result) float64 { return r.WorkPerS }
	enq := func(r *result) float64 { return r.EnqueuePerS }
	for _, it := range r.items {
		base := keyedBase(it.id)
		a, b := r.results[it.id], r.results[base]
		if base == "" || it.tables || len(a) == 0 || len(b) == 0 {
			continue
		}
		w, e := ratios(a, b, work), ratios(a, b, enq)
		if len(w) == 0 {
			continue
		}
		rows = append(rows, []string{it.id, "`" + base + "`", fmtVals(w, 2) + "×", fmtVals(e, 2) + "×",
			fmtVals(field(a, work), 0), fmtVals(field(b, work), 0)})
	}
	return section("Keyed ÷ unkeyed (same round)",
		"Every keyed run divided by the unkeyed drain of its round: the one-process keyed runs (1,000 keys, To=2; "+
			"with a second key per job; one hot key, To=50) by the one-process drain, those run across a network "+
			"(`--net-delay`: keyed-net, hotkey-net) by the drain across it (drain-net), the fleet's keyed and hot-key "+
			"runs by the fleet drain of as many processes. Work is jobs/s worked; EnqueueMany is jobs/s enqueued "+
			"(keyed jobs are admitted as they are enqueued).",
		[]string{"run", "÷ unkeyed run", "work ÷ unkeyed", "EnqueueMany ÷ unkeyed", "work jobs/s", "unkeyed work jobs/s"}, rows)
}
