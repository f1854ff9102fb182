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
// gone (another dispatcher declared this process dead and reaped its
// claims), or beats have failed for so long that it soon will be, the
// jobs running here are no longer this process's to finish: onLost
// cancels them, so none runs beside its own re-run elsewhere.
func (p *process) heartbeat(ctx context.Context) {
	cfg := p.c.cfg
	t := time.NewTicker(cfg.HeartbeatInterval)
	defer t.Stop()
	// Give up well before others may reap us.
	deadline := max(cfg.ProcessDeadAfter-2*cfg.HeartbeatInterval, cfg.HeartbeatInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := cfg.Now()
		ok, err := p.c.drv.Exec().Heartbeat(ctx, p.ID(), now)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			p.c.log.Warn("heartbeat failed", "process_id", p.ID(), "error", err)
			if now.Sub(p.lastBeatAt()) > deadline {
				p.onLost(fmt.Errorf("no heartbeat landed for %s: %w", now.Sub(p.lastBeatAt()).Round(time.Second), err))
			}
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
