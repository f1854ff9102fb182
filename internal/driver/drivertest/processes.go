package drivertest

import (
	"testing"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// deadAfter is the dispatcher's ProcessDeadAfter in the tests of dead
// processes.
const deadAfter = 30 * time.Second

// silence is a case of the evidence rule (package driver, "Dead
// processes"): process "silent" last beat at T0 (beating since an hour
// before) and registered its own DeadAfter own; process "witness" beat
// without a gap from T0+since to T0+last; a dispatcher judges at T0+now
// with deadAfter.
type silence struct {
	name             string
	own              time.Duration
	since, last, now time.Duration
	dead             bool
}

var silences = []silence{
	{"SharedSilenceIsNoEvidence", 10 * time.Second, -time.Hour, 0, 5 * time.Minute, false},
	{"SilentBeyondBothBoundsWhileAnotherBeat", 10 * time.Second, 0, 45 * time.Second, 50 * time.Second, true},
	{"WithinItsOwnLongerDeadAfter", time.Minute, 0, 45 * time.Second, 50 * time.Second, false},
	{"BeyondItsOwnLongerDeadAfter", time.Minute, 0, 65 * time.Second, 70 * time.Second, true},
	{"TheWitnessBeganLateInTheSilence", 10 * time.Second, 30 * time.Second, 45 * time.Second, 50 * time.Second, false},
	{"TheWitnessFellSilentToo", 10 * time.Second, -time.Hour, 20 * time.Second, 50 * time.Second, false},
	{"NotYetSilentForDeadAfter", 10 * time.Second, 0, 25 * time.Second, 25 * time.Second, false},
}

// witnessed sets up a silence case with hb as the silent process's
// heartbeat interval and returns both processes.
func (f *fixture) witnessed(c silence, hb time.Duration) (silent, witness int64) {
	f.t.Helper()
	silent = f.process("silent", T0.Add(-time.Hour), hb, c.own)
	f.beat(silent, T0, T0.Add(-time.Hour))
	witness = f.process("witness", T0.Add(c.since), time.Second, 10*time.Second)
	f.beat(witness, T0.Add(c.last), T0.Add(c.since))
	return silent, witness
}

// Processes: registering, heartbeats, and declaring dead only on
// evidence.
var _ = add("processes",
	test{"RegisterAndList", func(t *testing.T, f *fixture) {
		p := driver.Process{Kind: "worker+dispatcher", Name: "w1", Hostname: "h", PID: 77, Queues: "a,b",
			HeartbeatInterval: 2 * time.Second, DeadAfter: 20 * time.Second, StartedAt: T0}
		id1, err := f.ex().ProcessRegister(f.ctx, p)
		f.must(err)
		id2 := f.process("w2", T0, time.Second, time.Minute)
		if id1 <= 0 || id1 == id2 {
			t.Fatalf("RegisterProcess ids %d, %d: want distinct and positive", id1, id2)
		}
		list, err := f.ex().ProcessList(f.ctx)
		f.must(err)
		if len(list) != 2 {
			t.Fatalf("ListProcesses = %+v, want 2", list)
		}
		got := list[0]
		if got.ID != id1 {
			got = list[1]
		}
		if got.ID != id1 || got.Kind != p.Kind || got.Name != p.Name || got.Hostname != p.Hostname || got.PID != p.PID ||
			got.Queues != p.Queues || got.HeartbeatInterval != p.HeartbeatInterval || got.DeadAfter != p.DeadAfter {
			t.Errorf("ListProcesses read back %+v, want %+v", got, p)
		}
		for what, at := range map[string]time.Time{"StartedAt": got.StartedAt, "LastHeartbeatAt": got.LastHeartbeatAt, "BeatingSince": got.BeatingSince} {
			f.sameTime(what, at, T0)
		}
	}},
	test{"HeartbeatAndRenewHeldRenewOnlyTheProcesssKeys", func(t *testing.T, f *fixture) {
		pid := f.process("w", T0, time.Second, time.Minute)
		other := f.process("other", T0, time.Second, time.Minute)
		f.insert(T0, job("q", keyed("g/mine", 1)), job("r", keyed("g/theirs", 1)))
		f.semaphore("g/mine", 0, 1, 0, T0.Add(10*time.Second))
		f.semaphore("g/theirs", 0, 1, 0, T0.Add(10*time.Second))
		f.claim(f.ex(), "q", 1, pid, T0)
		f.claim(f.ex(), "r", 1, other, T0)
		at := T0.Add(40 * time.Second)
		f.beat(pid, at, T0.Add(time.Second))
		list, err := f.ex().ProcessList(f.ctx)
		f.must(err)
		for _, p := range list {
			if p.ID == pid {
				f.sameTime("LastHeartbeatAt", p.LastHeartbeatAt, at)
				f.sameTime("BeatingSince", p.BeatingSince, T0.Add(time.Second))
			}
		}
		f.sameTime("the beating process's key's ExpiresAt", f.sem("g/mine").ExpiresAt, at.Add(time.Minute))
		f.sameTime("another process's key's ExpiresAt", f.sem("g/theirs").ExpiresAt, T0.Add(10*time.Second))
	}},
	test{"HeartbeatOfADeregisteredProcess", func(t *testing.T, f *fixture) {
		pid := f.process("w", T0, time.Second, time.Minute)
		f.must(f.ex().ProcessDeregister(f.ctx, pid))
		for _, id := range []int64{pid, 987654} {
			landed, err := f.ex().ProcessHeartbeat(f.ctx, driver.Beat{ProcessID: id, At: T0.Add(time.Second), BeatingSince: T0})
			if landed || err != nil {
				t.Errorf("Heartbeat of process %d, whose row is gone = %v, %v; want false, nil", id, landed, err)
			}
		}
		if list, err := f.ex().ProcessList(f.ctx); err != nil || len(list) != 0 {
			t.Errorf("ListProcesses after deregistering = %+v, %v; want none", list, err)
		}
	}},
	test{"HeartbeatLandsBesideAHeldSemaphore", func(t *testing.T, f *fixture) {
		f.needRowLocks()
		pid := f.process("w", T0, time.Second, time.Minute)
		f.insert(T0, job("q", keyed("g/k", 1)))
		f.semaphore("g/k", 0, 1, 0, T0.Add(10*time.Second))
		f.claim(f.ex(), "q", 1, pid, T0)
		holder := f.begin()
		if _, ok, err := holder.SemaphoreLock(f.ctx, "g/k", ""); !ok || err != nil {
			t.Fatalf("SemaphoreLock: %v, %v", ok, err)
		}
		at := T0.Add(40 * time.Second)
		landed, err := f.ex().ProcessHeartbeat(f.quick(), driver.Beat{ProcessID: pid, At: at, BeatingSince: T0})
		if !landed || err != nil {
			t.Errorf("Heartbeat while another transaction holds a key it renews = %v, %v; want landed at once", landed, err)
		}
		if err := f.ex().SemaphoreRenewHeld(f.quick(), pid, at, RenewBelow); err != nil {
			t.Errorf("RenewHeld while another transaction holds the key = %v; want the key skipped at once", err)
		}
		f.must(holder.Rollback(f.ctx))
		f.beat(pid, at.Add(time.Second), T0)
		f.sameTime("ExpiresAt once the key is free", f.sem("g/k").ExpiresAt, at.Add(time.Second+time.Minute))
	}},
	test{"DeleteDeadProcessesOnEvidence", func(t *testing.T, f *fixture) {
		for _, c := range silences {
			t.Run(c.name, func(t *testing.T) {
				g := newFixture(t, f.open)
				silent, witness := g.witnessed(c, time.Second)
				n, err := g.ex().ProcessDeleteDead(g.ctx, T0.Add(c.now), deadAfter)
				g.must(err)
				list, err := g.ex().ProcessList(g.ctx)
				g.must(err)
				left := map[int64]bool{}
				for _, p := range list {
					left[p.ID] = true
				}
				if want := map[bool]int{true: 1}[c.dead]; n != want || left[silent] == c.dead || !left[witness] {
					t.Errorf("deleted %d (silent left: %v, witness left: %v); want the silent one deleted: %v", n, left[silent], left[witness], c.dead)
				}
			})
		}
	}},
	test{"DeleteDeadProcessesKeepsHolders", func(t *testing.T, f *fixture) {
		c := silences[1]
		silent, _ := f.witnessed(c, time.Second)
		f.insert(T0, job("q"))
		f.claim(f.ex(), "q", 1, silent, T0)
		if n, err := f.ex().ProcessDeleteDead(f.ctx, T0.Add(c.now), deadAfter); n != 0 || err != nil {
			t.Errorf("DeleteDeadProcesses of a dead process holding a claim = %d, %v; want 0 until its claims are reaped", n, err)
		}
	}},
	test{"ABeaconIsAHeartbeat", func(t *testing.T, f *fixture) {
		b, ok := f.d.(driver.Beaconer)
		if !ok {
			t.Skipf("%s keeps no beacons", f.d.Dialect())
		}
		c := silences[1]
		silent, _ := f.witnessed(c, time.Second)
		f.insert(T0, job("q"))
		f.claim(f.ex(), "q", 1, silent, T0)
		f.must(b.Beacon(silent, T0.Add(c.last)))
		lost, err := f.ex().ClaimListReapable(f.ctx, T0.Add(c.now), deadAfter, 10)
		f.must(err)
		n, err := f.ex().ProcessDeleteDead(f.ctx, T0.Add(c.now), deadAfter)
		f.must(err)
		if len(lost) != 0 || n != 0 {
			t.Errorf("a process silent in the database but with a fresh beacon: %d claims lost, %d processes deleted; want none", len(lost), n)
		}
	}},
)
