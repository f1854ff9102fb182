package worker

import (
	"math"
	"sync"
	"time"
)

// startLagHalfLife is how fast a process forgets a late begin: the lag
// it remembers halves every this long.
const startLagHalfLife = 10 * time.Second

// startLag is how late after their claims this process's rated runs
// lately reached their begin gate: the most seen, halving every
// startLagHalfLife. A claim's start slack widens to cover it
// (ratelimit.Slack), so on a CPU-starved process the runs begin, where a
// fixed slack of a few milliseconds sent them back to their line claim
// after claim without running.
type startLag struct {
	mu  sync.Mutex
	lag time.Duration
	at  time.Time // when lag was last raised
}

// read is the lag remembered at now.
func (s *startLag) read(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decayed(now)
}

func (s *startLag) decayed(now time.Time) time.Duration {
	if s.lag == 0 {
		return 0
	}
	age := now.Sub(s.at)
	if age <= 0 {
		return s.lag
	}
	return time.Duration(float64(s.lag) * math.Exp2(-float64(age)/float64(startLagHalfLife)))
}

// see records a run that reached its gate lag after its claim's stamp.
func (s *startLag) see(now time.Time, lag time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lag > s.decayed(now) {
		s.lag, s.at = lag, now
	}
}
