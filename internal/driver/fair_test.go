package driver

import (
	"slices"
	"testing"
)

func noShuffle(int, func(i, j int)) {}

func ids(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

// count tallies the picked jobs by key, given each key's first id.
func count(picked []int64, keys []KeyReady) map[string]int {
	out := map[string]int{}
	for _, id := range picked {
		for _, k := range keys {
			if slices.Contains(k.JobIDs, id) {
				out[k.Key]++
			}
		}
	}
	return out
}

func TestPickFair(t *testing.T) {
	t.Run("a newcomer goes before a backlog", func(t *testing.T) {
		keys := []KeyReady{{Key: "a", Running: 20, JobIDs: ids(1, 50)}, {Key: "b", JobIDs: ids(100, 5)}}
		got := PickFair(keys, 0, 1, noShuffle)
		if !slices.Equal(got, []int64{100}) {
			t.Fatalf("picked %v, want b's first job 100", got)
		}
	})
	t.Run("a lone key takes every slot", func(t *testing.T) {
		keys := []KeyReady{{Key: "a", Running: 3, JobIDs: ids(1, 50)}}
		if got := PickFair(keys, 0, 17, noShuffle); !slices.Equal(got, ids(1, 17)) {
			t.Fatalf("picked %v, want a's first 17", got)
		}
	})
	t.Run("equal keys share evenly", func(t *testing.T) {
		var keys []KeyReady
		for i, k := range []string{"a", "b", "c", "d"} {
			keys = append(keys, KeyReady{Key: k, JobIDs: ids(i*100, 50)})
		}
		c := count(PickFair(keys, 0, 20, noShuffle), keys)
		for _, k := range keys {
			if c[k.Key] != 5 {
				t.Fatalf("shares %v, want 5 each", c)
			}
		}
	})
	t.Run("weights 3 to 1", func(t *testing.T) {
		keys := []KeyReady{{Key: "a", Weight: 3, JobIDs: ids(1, 50)}, {Key: "b", JobIDs: ids(100, 50)}}
		if c := count(PickFair(keys, 0, 20, noShuffle), keys); c["a"] != 15 || c["b"] != 5 {
			t.Fatalf("shares %v, want a 15, b 5", c)
		}
	})
	t.Run("the policy's weight for keys with none", func(t *testing.T) {
		keys := []KeyReady{{Key: "a", JobIDs: ids(1, 50)}, {Key: "b", Weight: 1, JobIDs: ids(100, 50)}}
		if c := count(PickFair(keys, 4, 10, noShuffle), keys); c["a"] != 8 || c["b"] != 2 {
			t.Fatalf("shares %v, want a 8, b 2", c)
		}
	})
	t.Run("running jobs count", func(t *testing.T) {
		keys := []KeyReady{{Key: "a", Running: 6, JobIDs: ids(1, 50)}, {Key: "b", Running: 2, JobIDs: ids(100, 50)}}
		// b catches up to a's 6, then they alternate: 4 + 2 and 2... of 8.
		if c := count(PickFair(keys, 0, 8, noShuffle), keys); c["a"] != 2 || c["b"] != 6 {
			t.Fatalf("shares %v, want a 2, b 6", c)
		}
	})
	t.Run("ties go in the shuffled order", func(t *testing.T) {
		keys := []KeyReady{{Key: "a", JobIDs: ids(1, 5)}, {Key: "b", JobIDs: ids(100, 5)}}
		reverse := func(n int, swap func(i, j int)) {
			for i := 0; i < n/2; i++ {
				swap(i, n-1-i)
			}
		}
		if got := PickFair(keys, 0, 1, reverse); !slices.Equal(got, []int64{100}) {
			t.Fatalf("picked %v, want b's job first once shuffled ahead", got)
		}
	})
	t.Run("a key runs out", func(t *testing.T) {
		keys := []KeyReady{{Key: "a", JobIDs: ids(1, 2)}, {Key: "b", JobIDs: ids(100, 50)}}
		if c := count(PickFair(keys, 0, 10, noShuffle), keys); c["a"] != 2 || c["b"] != 8 {
			t.Fatalf("shares %v, want a 2, b 8", c)
		}
	})
}

func TestPickHead(t *testing.T) {
	// The head of a line: a runs, b and c idle, d has a weight of its own
	// below the queue's, e idle; heads in claim order a, b, d, c, e.
	head := KeyView{Keys: []KeyReady{
		{Key: "a", Running: 2, JobIDs: ids(1, 2), Head: 0},
		{Key: "b", JobIDs: ids(10, 2), Head: 1},
		{Key: "c", JobIDs: ids(30, 1), Head: 4},
		{Key: "d", Weight: 1, JobIDs: ids(20, 1), Head: 3},
		{Key: "e", Weight: 2, JobIDs: ids(40, 1), Head: 6},
		{Key: "f", Running: 1, Head: -1},
	}}
	t.Run("one job of each idle key of the queue's weight, in line order", func(t *testing.T) {
		got := PickHead(head, 2, 3)
		if !slices.Equal(got, []int64{10, 30, 40}) {
			t.Fatalf("picked %v, want b's, c's and e's first jobs", got)
		}
		// What PickFair picks from the same keys, whatever its tie order:
		// the same three keys, each once.
		fair := PickFair(head.Keys, 2, 3, noShuffle)
		slices.Sort(fair)
		if !slices.Equal(fair, got) {
			t.Fatalf("PickFair picked %v, PickHead %v", fair, got)
		}
	})
	t.Run("not enough such keys: it cannot tell", func(t *testing.T) {
		if got := PickHead(head, 2, 4); got != nil {
			t.Fatalf("picked %v from a head with 3 idle keys of weight 2 for 4 slots, want nil", got)
		}
	})
	t.Run("a key with a larger weight may wait past the head: it cannot tell", func(t *testing.T) {
		v := head
		v.MaxWeight = 3
		if got := PickHead(v, 2, 1); got != nil {
			t.Fatalf("picked %v with a stored weight above the queue's, want nil", got)
		}
		v.MaxWeight = 2
		if got := PickHead(v, 2, 1); !slices.Equal(got, []int64{10}) {
			t.Fatalf("picked %v, want b's first job", got)
		}
	})
	t.Run("weight 0 is 1", func(t *testing.T) {
		v := KeyView{Keys: []KeyReady{{Key: "d", Weight: 1, JobIDs: ids(20, 1), Head: 0}, {Key: "x", JobIDs: ids(50, 1), Head: 1}}}
		if got := PickHead(v, 0, 2); !slices.Equal(got, []int64{20, 50}) {
			t.Fatalf("picked %v, want both", got)
		}
	})
}

// TestPickFairCountsSlots: two keys of equal weight, P's jobs of 2 slots
// and Q's of 1, nothing running: a pick of 6 gives each 4 slots (P 2
// jobs, Q 4), not 3 jobs each.
func TestPickFairCountsSlots(t *testing.T) {
	keys := []KeyReady{
		{Key: "P", JobIDs: []int64{1, 2, 3}, Slots: []int{2, 2, 2}},
		{Key: "Q", JobIDs: []int64{4, 5, 6, 7, 8, 9}, Slots: []int{1, 1, 1, 1, 1, 1}},
	}
	got := PickFair(keys, 1, 6, noShuffle)
	slots := map[string]int{}
	for _, id := range got {
		if id <= 3 {
			slots["P"] += 2
		} else {
			slots["Q"]++
		}
	}
	if len(got) != 6 || slots["P"] != 4 || slots["Q"] != 4 {
		t.Errorf("PickFair = %v: P %d slots, Q %d; want 6 jobs, 4 slots each", got, slots["P"], slots["Q"])
	}
}
