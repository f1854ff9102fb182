package bq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bqueue/bq/internal/driver"
)

// The metadata keys bq sets on the jobs of a workflow and of a batch, so
// that ListJobs (JobFilter.Metadata), the CLI and the dashboard find them.
const (
	// MetaWorkflow is a workflow's id, on each of its tasks' jobs.
	MetaWorkflow = "bq.workflow"
	// MetaWorkflowName is the name NewWorkflow was given.
	MetaWorkflowName = "bq.workflow_name"
	// MetaTask is a task's name within its workflow.
	MetaTask = "bq.task"
	// MetaBatch is a batch's id, on its jobs and its callbacks.
	MetaBatch = "bq.batch"
	// MetaCallback is "success" or "finish" on a batch's callback jobs.
	MetaCallback = "bq.callback"
	// MetaAfter is a task's dependencies by name, comma-separated.
	MetaAfter = "bq.after"
)

// Workflow is a graph of jobs (tasks), each named, each running once the
// tasks it comes after completed: a fan-out, a fan-in, a diamond. Add the
// tasks, then Enqueue: the whole graph is checked first (a cycle, a
// dependency on no task, a name used twice refuse it, storing nothing),
// then stored in one transaction, each task a job that waits for the jobs
// of the tasks it comes after (DependsOn). Limits hold as for any job:
// a task is admitted, its keys' limits and rate applied, only as its last
// dependency completes. See docs/workflows.md.
//
//	wf := bq.NewWorkflow("nightly-report")
//	wf.Add("fetch", Fetch.Item(FetchArgs{Day: day}))
//	wf.Add("parse", Parse.Item(ParseArgs{Day: day}), "fetch")
//	wf.Add("charts", Charts.Item(ChartArgs{Day: day}), "parse")
//	wf.Add("totals", Totals.Item(TotalArgs{Day: day}), "parse")
//	wf.Add("mail", Mail.Item(MailArgs{Day: day}), "charts", "totals")
//	res, err := wf.Enqueue(ctx, client)
type Workflow struct {
	name  string
	tasks []workflowTask
	errs  []error
}

type workflowTask struct {
	name         string
	item         Item
	after        []string
	evenIfFailed bool
}

// MaxWorkflowTasks is the most tasks one workflow holds.
const MaxWorkflowTasks = 10_000

// NewWorkflow starts a workflow; name (MaxLabelBytes of letters, digits
// and _-.:) is stored on each task's job (MetaWorkflowName).
func NewWorkflow(name string) *Workflow {
	w := &Workflow{name: name}
	if err := validateLabel("workflow name", name); err != nil {
		w.errs = append(w.errs, err)
	}
	return w
}

// Add adds task name, the job item (a job kind's Item, with any enqueue
// options), run after the tasks named in after have completed. If one
// of them fails for good or is cancelled, this task is cancelled, and
// so are the tasks after it; AddEvenIfFailed runs it anyway. It returns
// w, for chaining; problems are reported by Enqueue.
func (w *Workflow) Add(name string, item Item, after ...string) *Workflow {
	return w.add(name, item, after, false)
}

// AddEvenIfFailed is Add for a task that runs once every task it comes
// after has ended, however each ended: a clean-up, a report.
func (w *Workflow) AddEvenIfFailed(name string, item Item, after ...string) *Workflow {
	return w.add(name, item, after, true)
}

func (w *Workflow) add(name string, item Item, after []string, evenIfFailed bool) *Workflow {
	w.tasks = append(w.tasks, workflowTask{name: name, item: item, after: slices.Clone(after), evenIfFailed: evenIfFailed})
	return w
}

// WorkflowResult is what Enqueue stored: the workflow's id (MetaWorkflow)
// and each task's result by name.
type WorkflowResult struct {
	ID    string
	Tasks map[string]EnqueueResult
}

// Enqueue checks and stores the workflow in one transaction of its own.
func (w *Workflow) Enqueue(ctx context.Context, c *Client) (*WorkflowResult, error) {
	return inOwnTx(ctx, c, "workflow", w.EnqueueTx)
}

// EnqueueTx stores the workflow inside tx, the caller's transaction: it
// exists only if tx commits.
func (w *Workflow) EnqueueTx(ctx context.Context, c *Client, tx Tx) (*WorkflowResult, error) {
	order, err := w.check()
	if err != nil {
		return nil, fmt.Errorf("enqueue workflow %q: %w", w.name, err)
	}
	raw, err := unwrapTx(c, tx, "Workflow.EnqueueTx")
	if err != nil {
		return nil, err
	}
	res := &WorkflowResult{ID: newGroupID(), Tasks: map[string]EnqueueResult{}}
	md := map[string]string{MetaWorkflow: res.ID, MetaWorkflowName: w.name}
	now := c.cfg.Now()
	// One enqueue per level: a task's dependencies are stored (and have
	// ids) before it.
	for _, level := range order {
		jobs := make([]*driver.NewJob, len(level))
		for i, t := range level {
			j, err := t.item.make(ctx, c, now)
			if err != nil {
				return nil, fmt.Errorf("enqueue workflow %q: task %q: %w", w.name, t.name, err)
			}
			md[MetaTask] = t.name
			md[MetaAfter] = strings.Join(slices.Compact(slices.Sorted(slices.Values(t.after))), ",")
			if j.Metadata, err = withMetadata(j.Metadata, md); err != nil {
				return nil, fmt.Errorf("enqueue workflow %q: task %q: %w", w.name, t.name, err)
			}
			for _, a := range t.after {
				if id := res.Tasks[a].ID; id != 0 {
					j.DependsOn = append(j.DependsOn, id)
				} else if !t.evenIfFailed {
					// A task admission discarded, or a duplicate: it will
					// never complete in this workflow.
					return nil, fmt.Errorf("enqueue workflow %q: task %q comes after %q, which was not stored (%s: %s)",
						w.name, t.name, a, res.Tasks[a].State, res.Tasks[a].Reason)
				}
			}
			j.EvenIfFailed = t.evenIfFailed && len(j.DependsOn) > 0
			jobs[i] = j
		}
		results, err := c.enqueueJobs(ctx, raw, jobs, now)
		if err != nil {
			return nil, fmt.Errorf("enqueue workflow %q: %w", w.name, err)
		}
		for i, t := range level {
			res.Tasks[t.name] = results[i]
		}
	}
	return res, nil
}

// check refuses a workflow with a bad or repeated name, a task coming
// after no task, or a cycle, and returns its tasks by level: each after
// only tasks of earlier levels.
func (w *Workflow) check() ([][]workflowTask, error) {
	errs := slices.Clone(w.errs)
	if len(w.tasks) == 0 {
		errs = append(errs, errors.New("it has no task: Add some"))
	}
	if len(w.tasks) > MaxWorkflowTasks {
		errs = append(errs, fmt.Errorf("it has %d tasks, above MaxWorkflowTasks (%d)", len(w.tasks), MaxWorkflowTasks))
	}
	byName := map[string]int{}
	for i, t := range w.tasks {
		if err := validateLabel("task name", t.name); err != nil {
			errs = append(errs, err)
		}
		if _, dup := byName[t.name]; dup {
			errs = append(errs, fmt.Errorf("task name %q is used twice: name each task once", t.name))
		}
		byName[t.name] = i
		if t.item.newJob == nil {
			errs = append(errs, fmt.Errorf("task %q has the zero bq.Item: make it with its job's Item method, e.g. Charge.Item(args)", t.name))
		}
	}
	for _, t := range w.tasks {
		for _, a := range t.after {
			if _, ok := byName[a]; !ok {
				errs = append(errs, fmt.Errorf("task %q comes after %q, which is no task of the workflow: Add it, or fix the name", t.name, a))
			} else if a == t.name {
				errs = append(errs, fmt.Errorf("task %q comes after itself", t.name))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidJob, err)
	}
	// Kahn's order, level by level.
	left := map[string]int{}
	for _, t := range w.tasks {
		left[t.name] = len(slices.Compact(slices.Sorted(slices.Values(t.after))))
	}
	var levels [][]workflowTask
	placed := 0
	for placed < len(w.tasks) {
		var level []workflowTask
		for _, t := range w.tasks {
			if n, ok := left[t.name]; ok && n == 0 {
				level = append(level, t)
			}
		}
		if len(level) == 0 {
			var stuck []string
			for _, t := range w.tasks {
				if _, ok := left[t.name]; ok {
					stuck = append(stuck, t.name)
				}
			}
			return nil, fmt.Errorf("%w: the tasks %s come after each other in a cycle: a workflow runs each task once, after the ones it names",
				ErrInvalidJob, quotedList(stuck))
		}
		for _, t := range level {
			delete(left, t.name)
		}
		for _, t := range w.tasks {
			if _, ok := left[t.name]; !ok {
				continue
			}
			for _, a := range slices.Compact(slices.Sorted(slices.Values(t.after))) {
				if slices.ContainsFunc(level, func(l workflowTask) bool { return l.name == a }) {
					left[t.name]--
				}
			}
		}
		levels = append(levels, level)
		placed += len(level)
	}
	return levels, nil
}

// make is the item's job, refusing the zero Item.
func (it Item) make(ctx context.Context, c *Client, now time.Time) (*driver.NewJob, error) {
	if it.newJob == nil {
		return nil, fmt.Errorf("%w: the zero bq.Item: make it with its job's Item method, e.g. Charge.Item(args)", ErrInvalidJob)
	}
	return it.newJob(ctx, c, now)
}

// withMetadata adds md to a job's metadata (JSON, nil for none), checked
// as WithMetadata's.
func withMetadata(raw []byte, md map[string]string) ([]byte, error) {
	all := map[string]string{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &all); err != nil {
			return nil, fmt.Errorf("read the job's metadata: %w", err)
		}
	}
	for k, v := range md {
		all[k] = v
	}
	return encodeMetadata(all)
}

// newGroupID is a workflow's or a batch's id: 16 random bytes in hex.
func newGroupID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}

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
