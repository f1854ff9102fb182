package bq

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// process is this Run's registration: its row in the processes table and
// the heartbeat that keeps it (and the semaphores its claims hold) alive.
type process struct {
	c    *Client
	kind string

	mu       sync.Mutex
	id       int64
	lastBeat time.Time
	// onLost is called when this process can no longer be sure it is
	// considered alive: its claims may be reaped and run elsewhere.
	onLost func(cause error)
}

func (c *Client) register(ctx context.Context, kind string, queues []string) (*process, error) {
	host, _ := os.Hostname()
	name := c.cfg.Name
	if name == "" {
		name = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	slices.Sort(queues)
	now := c.cfg.Now()
	id, err := c.drv.Exec().RegisterProcess(ctx, driver.Process{
		Kind: kind, Name: name, Hostname: host, PID: os.Getpid(), Queues: strings.Join(queues, ","),
		HeartbeatInterval: c.cfg.HeartbeatInterval, StartedAt: now,
	})
	if err != nil {
		return nil, c.explainErr(ctx, err)
	}
	return &process{c: c, kind: kind, id: id, lastBeat: now, onLost: func(error) {}}, nil
}

// ID is the current process id (it changes if the process re-registers).
func (p *process) ID() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.id
}

// heartbeat beats every HeartbeatInterval until ctx ends. When the row is
// gone (a dispatcher declared this process dead and reaped its claims),
// the jobs running here are no longer this process's to finish: onLost
// cancels them, so none runs on beside its own re-run elsewhere.
func (p *process) heartbeat(ctx context.Context) {
	cfg := p.c.cfg
	t := time.NewTicker(cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A beat that cannot land within two intervals is as good as lost.
		beatCtx, cancel := context.WithTimeout(ctx, 2*cfg.HeartbeatInterval)
		now := cfg.Now()
		ok, err := p.c.drv.Exec().Heartbeat(beatCtx, p.ID(), now)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			p.c.log.Warn("heartbeat failed", "process_id", p.ID(), "error", err)
		case !ok:
			p.c.log.Error("process was declared dead and its claims reaped; cancelling its running jobs and registering again", "process_id", p.ID())
			p.onLost(fmt.Errorf("process %d was declared dead", p.ID()))
			if err := p.reregister(ctx); err != nil {
				p.c.log.Error("register again", "error", err)
			}
		default:
			p.mu.Lock()
			p.lastBeat = now
			p.mu.Unlock()
		}
	}
}

// watchdog cancels this process's running jobs once its last heartbeat is
// so old that a dispatcher may declare it dead at any moment (one beat
// before ProcessDeadAfter). Beats may be failing (database unreachable)
// or stuck (the process was paused, the database is locked); either way
// its claims may soon be reaped and run elsewhere, so its own runs stop.
func (p *process) watchdog(ctx context.Context) {
	cfg := p.c.cfg
	t := time.NewTicker(max(cfg.HeartbeatInterval/4, 10*time.Millisecond))
	defer t.Stop()
	fenced := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if last := p.lastBeatAt(); p.silent() && !last.Equal(fenced) {
			fenced = last
			silence := cfg.Now().Sub(last)
			p.c.log.Error("no heartbeat has landed for too long; cancelling running jobs before they are reaped",
				"process_id", p.ID(), "silence", silence.Round(time.Millisecond), "dead_after", cfg.ProcessDeadAfter)
			p.onLost(fmt.Errorf("no heartbeat landed for %s", silence.Round(time.Millisecond)))
		}
	}
}

// silent reports whether the last heartbeat is so old that this process
// must stop claiming: a dispatcher may declare it dead at any moment.
func (p *process) silent() bool {
	cfg := p.c.cfg
	// One beat before a dispatcher may reap: late enough that a beat in
	// flight lands first (ProcessDeadAfter is at least three beats).
	return cfg.Now().Sub(p.lastBeatAt()) > cfg.ProcessDeadAfter-cfg.HeartbeatInterval
}

func (p *process) lastBeatAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastBeat
}

func (p *process) reregister(ctx context.Context) error {
	fresh, err := p.c.register(ctx, p.kind, nil)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.id, p.lastBeat = fresh.id, fresh.lastBeat
	p.mu.Unlock()
	return nil
}

func (p *process) deregister(ctx context.Context) {
	if err := p.c.drv.Exec().DeregisterProcess(ctx, p.ID()); err != nil {
		p.c.log.Warn("deregister process", "process_id", p.ID(), "error", err)
	}
}
