package plan

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestInformative(t *testing.T) {
	tests := []struct {
		name string
		q    Posterior
		n    int
		want float64
	}{
		// Beta(1,1): E[p^4] = 1/5, so 1 - 2/5.
		{"uniform prior", Posterior{1, 1}, 4, 0.6},
		// Beta(2,1): E[p^2] = 2*3/(3*4) = 1/2, E[(1-p)^2] = 1*2/(3*4) = 1/6.
		{"one pass", Posterior{2, 1}, 2, 1 - 0.5 - 1.0/6},
		{"group of one", Posterior{3, 5}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.q.Informative(tt.n); !near(got, tt.want) {
				t.Errorf("%v.Informative(%d) = %v, want %v", tt.q, tt.n, got, tt.want)
			}
		})
	}
}

func TestPredictiveSumsToOne(t *testing.T) {
	q := Posterior{2.5, 0.7}
	s := 0.0
	for x := 0; x <= 6; x++ {
		s += q.predictive(6, x)
	}
	// Beta(1,1) gives every count of k the same chance 1/(k+1).
	if !near(s, 1) || !near(Posterior{1, 1}.predictive(4, 2), 0.2) {
		t.Errorf("predictive sums to %v, uniform pmf(2 of 4) = %v; want 1, 0.2", s, Posterior{1, 1}.predictive(4, 2))
	}
}

func ro(sample int, reward float64, st Status, length int) Rollout {
	return Rollout{TaskID: "t", Sample: sample, Reward: reward, Status: st, Length: length}
}

func samples(rs []Rollout) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.Sample)
	}
	return out
}

func TestTake(t *testing.T) {
	tests := []struct {
		name       string
		rs         []Rollout
		ok         bool
		group, out []int
	}{
		{"status then length", []Rollout{
			ro(0, 1, StatusTimeout, 5), ro(1, 1, StatusCompleted, 90), ro(2, 1, StatusTruncated, 1), ro(3, 1, StatusCompleted, 10),
			ro(4, 0, StatusCompleted, 50), ro(5, 0, StatusCompleted, 20), ro(6, 0, StatusAborted, 1), ro(7, 0, StatusTimeout, 1),
		}, true, []int{3, 1, 5, 4}, []int{2, 0, 7, 6}},
		{"one positive is enough", []Rollout{ro(0, 0, StatusCompleted, 1), ro(1, 0, StatusCompleted, 1), ro(2, 0, StatusCompleted, 1), ro(3, 0.5, StatusCompleted, 1)},
			true, []int{3, 0, 1, 2}, nil},
		{"aborted never counts", []Rollout{ro(0, 1, StatusAborted, 1), ro(1, 0, StatusCompleted, 1), ro(2, 0, StatusCompleted, 1), ro(3, 0, StatusCompleted, 1), ro(4, 0, StatusCompleted, 1)},
			false, nil, []int{0, 1, 2, 3, 4}},
		{"too few", []Rollout{ro(0, 1, StatusCompleted, 1), ro(1, 0, StatusCompleted, 1)}, false, nil, []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, rest, ok := newWindow(4, 0.25, 0.75).take(tt.rs)
			if ok != tt.ok || !reflect.DeepEqual(samples(g), tt.group) || !reflect.DeepEqual(samples(rest), tt.out) {
				t.Errorf("take = %v, %v, %v; want %v, %v, %v", samples(g), samples(rest), ok, tt.group, tt.out, tt.ok)
			}
		})
	}
}

func TestBalanceProb(t *testing.T) {
	w := newWindow(4, 0.25, 0.75)
	// 4 failures seen, uniform prior over p: balanceable after k more iff
	// at least one pass, probability 1 - 1/(k+1).
	rs := []Rollout{ro(0, 0, StatusCompleted, 1), ro(1, 0, StatusCompleted, 1), ro(2, 0, StatusCompleted, 1), ro(3, 0, StatusCompleted, 1)}
	for k := 1; k <= 4; k++ {
		if got, want := w.balanceProb(rs, k, Posterior{1, 1}), 1-1/float64(k+1); !near(got, want) {
			t.Errorf("balanceProb(4 fails, %d) = %v, want %v", k, got, want)
		}
	}
}

// scripted answers each rollout from a fixed table of outcomes per task.
func scripted(outcomes map[string][]float64, log *[]Stride) Exec {
	return func(_ context.Context, step int, strides []Stride) ([]Rollout, error) {
		*log = append(*log, strides...)
		var rs []Rollout
		for i := len(strides) - 1; i >= 0; i-- { // reversed: Drive must reorder
			s := strides[i]
			for k := s.Count - 1; k >= 0; k-- {
				o := outcomes[s.TaskID]
				rs = append(rs, Rollout{TaskID: s.TaskID, Sample: s.First + k, Step: step, Status: StatusCompleted, Reward: o[(s.First+k)%len(o)]})
			}
		}
		return rs, nil
	}
}

// TestDriveRecyclesAndIsDeterministic: a task that fails 4 times and then
// passes keeps the 4 failures as surplus; the same seed and outcomes give
// the same strides.
func TestDriveRecyclesAndIsDeterministic(t *testing.T) {
	outcomes := map[string][]float64{"mixed": {1, 0}, "hard": {0, 0, 0, 0, 0, 0, 0, 0, 1}, "easy": {1}}
	run := func() ([]Stride, Metrics, []*Group) {
		p := New(Options{Batch: 3, Seed: 7})
		for _, id := range []string{"mixed", "hard", "easy"} {
			p.AddTask(id, Posterior{})
		}
		var log []Stride
		var groups []*Group
		err := Drive(context.Background(), p, DriveOptions{Budget: 40, Exec: scripted(outcomes, &log), OnGroup: func(g *Group) { groups = append(groups, g) }})
		if err != nil {
			t.Fatal(err)
		}
		return log, p.Metrics(), groups
	}
	log1, m, groups := run()
	log2, _, _ := run()
	if !reflect.DeepEqual(log1, log2) {
		t.Fatalf("two runs differ:\n%v\n%v", log1, log2)
	}
	if m.Rollouts != 40 || m.Wasted != 40-4*m.Groups || m.Groups == 0 {
		t.Errorf("metrics %+v: want 40 rollouts, wasted = 40 - 4 groups", m)
	}
	recycled := 0
	for _, g := range groups {
		recycled += g.Recycled
		if g.SelectionWeight <= 0 {
			t.Errorf("group %+v: selection weight %v", g, g.SelectionWeight)
		}
	}
	if recycled == 0 || recycled != m.Recycled {
		t.Errorf("groups recycled %d, metrics %d; want the hard task's failures reused", recycled, m.Recycled)
	}
}

func TestObserveWithoutAttempt(t *testing.T) {
	p := New(Options{})
	p.AddTask("a", Posterior{})
	if err := p.Observe(Rollout{TaskID: "a"}); err == nil {
		t.Error("Observe without an attempt: nil error")
	}
	if err := (Options{N: 4, NMax: 8, Batch: 1, Lo: 0.3, Hi: 0.45, Confidence: 0.5, Prior: Posterior{1, 1}}).Validate(); !errors.Is(err, ErrBadOptions) {
		t.Errorf("window [0.3, 0.45] of 4: %v, want ErrBadOptions", err)
	}
}
