package ui

import (
	"slices"
	"strings"

	"github.com/bqueue/bq"
)

// fleet is what the overview says of the processes: how many are live,
// and what nobody runs. bq's workers run inside the application's own
// binary (they need its job code): client.Run starts workers and a
// dispatcher, client.RunWorkers only workers, and `bq dispatcher` (or
// client.RunDispatcher) only a dispatcher.
type fleet struct {
	Live, Registered  int
	Workers           int // live processes that work queues
	Dispatchers       int // live processes that run a dispatcher
	Unworked          map[string]bool
	NoneLive          bool
	NoWorker          bool
	NoDispatcher      bool
	UnworkedWithReady []string // queues with ready jobs no live process works
}

func fleetOf(h *bq.Health) fleet {
	f := fleet{Registered: len(h.Processes), Unworked: map[string]bool{}}
	worked := map[string]bool{}
	for _, p := range h.Processes {
		if !p.Alive {
			continue
		}
		f.Live++
		if strings.Contains(p.Kind, "worker") {
			f.Workers++
			for _, q := range p.Queues {
				worked[q] = true
			}
		}
		if strings.Contains(p.Kind, "dispatcher") {
			f.Dispatchers++
		}
	}
	for _, q := range h.Queues {
		if q.Ready > 0 && !worked[q.Queue] {
			f.Unworked[q.Queue] = true
			f.UnworkedWithReady = append(f.UnworkedWithReady, q.Queue)
		}
	}
	slices.Sort(f.UnworkedWithReady)
	f.NoneLive = f.Live == 0
	f.NoWorker = f.Live > 0 && f.Workers == 0
	f.NoDispatcher = f.Live > 0 && f.Dispatchers == 0
	return f
}
