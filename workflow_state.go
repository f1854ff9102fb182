package bq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// WorkflowState is a workflow's tasks as stored now (Client.Workflow).
type WorkflowState struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Tasks in the order they may run: each after the ones it names.
	Tasks []WorkflowTask `json:"tasks"`
	// States counts the tasks in each state.
	States map[JobState]int `json:"states"`
}

// WorkflowTask is one task of a workflow and its job.
type WorkflowTask struct {
	Name  string   `json:"name"`
	JobID int64    `json:"job_id"`
	Kind  string   `json:"kind"`
	State JobState `json:"state"`
	// After names the tasks it runs after.
	After []string `json:"after,omitempty"`
	// Level is its column in the graph: 0 for a task after none, else
	// one more than the highest of its After.
	Level int `json:"level"`
}

// Workflow reads workflow id's tasks (WorkflowResult.ID) and their
// states; ErrJobNotFound when no job carries the id (never enqueued, or
// deleted after its retention).
func (c *Client) Workflow(ctx context.Context, id string) (*WorkflowState, error) {
	if id == "" {
		return nil, errors.New("workflow: the id is empty: pass the ID its Enqueue returned")
	}
	out := &WorkflowState{ID: id, States: map[JobState]int{}}
	f := JobFilter{Metadata: map[string]string{MetaWorkflow: id}, Limit: 500}
	for {
		page, err := c.ListJobs(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("workflow %s: %w", id, err)
		}
		for _, j := range page.Jobs {
			t := WorkflowTask{Name: j.Metadata[MetaTask], JobID: j.ID, Kind: j.Kind, State: j.State}
			if a := j.Metadata[MetaAfter]; a != "" {
				t.After = strings.Split(a, ",")
			}
			out.Name = j.Metadata[MetaWorkflowName]
			out.Tasks = append(out.Tasks, t)
			out.States[j.State]++
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	if len(out.Tasks) == 0 {
		return nil, fmt.Errorf("workflow %s: %w: no job carries its id", id, ErrJobNotFound)
	}
	levelTasks(out.Tasks)
	return out, nil
}

// levelTasks sets each task's Level and sorts them by level, then name.
func levelTasks(tasks []WorkflowTask) {
	at := map[string]int{}
	for i, t := range tasks {
		at[t.Name] = i
	}
	var level func(i int, seen map[int]bool) int
	level = func(i int, seen map[int]bool) int {
		if seen[i] { // no cycle is stored; guard anyway
			return 0
		}
		seen[i] = true
		defer delete(seen, i)
		l := 0
		for _, a := range tasks[i].After {
			if j, ok := at[a]; ok {
				l = max(l, level(j, seen)+1)
			}
		}
		return l
	}
	for i := range tasks {
		tasks[i].Level = level(i, map[int]bool{})
	}
	slices.SortFunc(tasks, func(a, b WorkflowTask) int {
		if a.Level != b.Level {
			return a.Level - b.Level
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// CancelWorkflow cancels every job of workflow id (WorkflowResult.ID)
// that has not finished, as Cancel does each: waiting and queued tasks
// end cancelled, running ones are asked to stop. It returns how many
// jobs it cancelled or asked to stop.
func (c *Client) CancelWorkflow(ctx context.Context, id string) (int, error) {
	return c.cancelGroup(ctx, MetaWorkflow, id)
}

// CancelBatch cancels every job of batch id (BatchResult.ID) that has
// not finished, its callbacks included, as CancelWorkflow does.
func (c *Client) CancelBatch(ctx context.Context, id string) (int, error) {
	return c.cancelGroup(ctx, MetaBatch, id)
}

// unfinishedStates are the states a cancel takes a job out of.
var unfinishedStates = []JobState{StateWaiting, StateScheduled, StateBlocked, StateReady, StateRunning, StateFailed}

func (c *Client) cancelGroup(ctx context.Context, key, id string) (int, error) {
	if id == "" {
		return 0, fmt.Errorf("cancel %s: the id is empty: pass the ID its Enqueue returned", key)
	}
	f := JobFilter{Metadata: map[string]string{key: id}, States: unfinishedStates, Limit: 500}
	var ids []int64
	for {
		page, err := c.ListJobs(ctx, f)
		if err != nil {
			return 0, fmt.Errorf("cancel %s %s: %w", key, id, err)
		}
		for _, j := range page.Jobs {
			ids = append(ids, j.ID)
		}
		if page.Next == "" {
			break
		}
		f.After = page.Next
	}
	// The tasks after others first: each is cancelled by hand, not as
	// the end of the one it waits for.
	slices.Sort(ids)
	slices.Reverse(ids)
	n := 0
	for _, jid := range ids {
		switch _, err := c.Cancel(ctx, jid); {
		case err == nil:
			n++
		case errors.Is(err, ErrJobFinished), errors.Is(err, ErrJobNotFound):
		default:
			return n, fmt.Errorf("cancel %s %s: %w", key, id, err)
		}
	}
	return n, nil
}
