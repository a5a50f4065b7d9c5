package advantage

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func f(v float64) *float64 { return &v }

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-12 || math.IsNaN(a[i]) {
			return false
		}
	}
	return true
}

func TestReturns(t *testing.T) {
	tests := []struct {
		name    string
		rewards []float64
		gamma   float64
		want    []float64
	}{
		{"undiscounted", []float64{0.1, 0, 1.2}, 1, []float64{1.3, 1.2, 1.2}},
		{"discounted", []float64{1, 2, 4}, 0.5, []float64{3, 4, 4}},
		{"nan counts as 0", []float64{math.NaN(), 1, math.Inf(1)}, 1, []float64{1, 1, 0}},
		{"empty", nil, 1, []float64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Returns(tt.rewards, tt.gamma); !near(got, tt.want) {
				t.Errorf("Returns(%v, %v) = %v, want %v", tt.rewards, tt.gamma, got, tt.want)
			}
		})
	}
}

// TestOutcomeEstimators: outcomes 1, -1, -1 by hand (docs/rl.md).
func TestOutcomeEstimators(t *testing.T) {
	rs := []Rollout{{Outcome: f(1)}, {Outcome: f(-1)}, {Outcome: f(-1)}}
	idx := []int{0, 1, 2}
	s := math.Sqrt(8.0 / 9)
	tests := []struct {
		e    Estimator
		want []float64
	}{
		{RLOO, []float64{2, -1, -1}},
		{GRPO, []float64{(4.0 / 3) / s, (-2.0 / 3) / s, (-2.0 / 3) / s}},
		{DrGRPO, []float64{4.0 / 3, -2.0 / 3, -2.0 / 3}},
	}
	for _, tt := range tests {
		if got := Outcomes(rs, idx, tt.e); !near(got, tt.want) {
			t.Errorf("Outcomes(%s) = %v, want %v", tt.e, got, tt.want)
		}
		eq := []Rollout{{Outcome: f(0.1)}, {Outcome: f(0.1)}, {Outcome: f(0.1)}}
		if got := Outcomes(eq, idx, tt.e); !slices.Equal(got, []float64{0, 0, 0}) {
			t.Errorf("Outcomes(%s) of equal rewards = %v, want zeros", tt.e, got)
		}
		if got := Outcomes(rs[:1], idx[:1], tt.e); !slices.Equal(got, []float64{0}) {
			t.Errorf("Outcomes(%s) of a group of one = %v, want [0]", tt.e, got)
		}
	}
}

// TestGroupShortAndLong: a rollout of 3 turns and one of 30, by hand
// (the worked example of docs/rl.md).
func TestGroupShortAndLong(t *testing.T) {
	long := make([]float64, 30)
	long[0] = -0.1
	res := Group([]Rollout{{Outcome: f(1), Process: []float64{0.1, 0, 0.2}}, {Outcome: f(-1), Process: long}},
		Options{Gamma: 1, Lambda: 0.1})
	if want := []float64{2.04, 2.02, 2.02}; !near(res[0].Advantages, want) {
		t.Errorf("short advantages = %v, want %v", res[0].Advantages, want)
	}
	want := make([]float64, 30)
	for i := range want {
		want[i] = -2
	}
	want[0], want[1], want[2] = -2.04, -2.02, -2.02
	if !near(res[1].Advantages, want) {
		t.Errorf("long advantages = %v, want %v", res[1].Advantages, want)
	}
	if want := []float64{1.3, 1.2, 1.2}; !near(res[0].Returns, want) {
		t.Errorf("short returns = %v, want %v", res[0].Returns, want)
	}
	if res[1].Returns[0] != -1.1 || res[1].Rewards[29] != -1 {
		t.Errorf("long return %v, last reward %v, want -1.1, -1", res[1].Returns[0], res[1].Rewards[29])
	}
}

func TestGroupDefinedResults(t *testing.T) {
	one := Group([]Rollout{{Outcome: f(1), Process: []float64{0.2, -0.1}}}, Options{Gamma: 1, Lambda: 0.1})
	if !slices.Equal(one[0].Advantages, []float64{0, 0}) {
		t.Errorf("group of one: advantages %v, want zeros", one[0].Advantages)
	}
	bad := Group([]Rollout{{Outcome: f(math.NaN()), Process: []float64{math.Inf(-1)}}, {Outcome: f(0), Process: []float64{0}}, {Process: []float64{1}}},
		Options{Gamma: 1, Lambda: 0.1, Estimator: GRPO})
	if !slices.Equal(bad[0].Advantages, []float64{0}) || !slices.Equal(bad[1].Advantages, []float64{0}) {
		t.Errorf("NaN/Inf inputs: advantages %v %v, want zeros", bad[0].Advantages, bad[1].Advantages)
	}
	if bad[2].Advantages != nil {
		t.Errorf("no outcome: advantages %v, want nil", bad[2].Advantages)
	}
}

func randomGroup(r *rand.Rand) []Rollout {
	rs := make([]Rollout, 1+r.IntN(6))
	for i := range rs {
		rs[i].Outcome = f(float64(r.IntN(3) - 1))
		rs[i].Process = make([]float64, 1+r.IntN(40))
		for t := range rs[i].Process {
			if r.IntN(3) == 0 {
				rs[i].Process[t] = r.Float64()*0.6 - 0.3
			}
		}
	}
	return rs
}

// TestGroupProperties: the first-turn advantages of a group sum to 0, and
// appending zero-reward turns to one rollout changes no other rollout's
// advantages, for every estimator and discount.
func TestGroupProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for k := range 2000 {
		rs := randomGroup(r)
		o := Options{Gamma: []float64{1, 0.9}[k%2], Lambda: 0.1, Estimator: []Estimator{RLOO, GRPO, DrGRPO}[k%3]}
		res := Group(rs, o)
		sum := 0.0
		for _, x := range res {
			sum += x.Advantages[0]
		}
		if math.Abs(sum) > 1e-9 {
			t.Fatalf("group %d: first-turn advantages sum to %v, want 0", k, sum)
		}
		j := r.IntN(len(rs))
		longer := slices.Clone(rs)
		longer[j].Process = append(slices.Clone(rs[j].Process), make([]float64, 1+r.IntN(30))...)
		res2 := Group(longer, o)
		for i := range rs {
			if i != j && !slices.Equal(res[i].Advantages, res2[i].Advantages) {
				t.Fatalf("group %d: padding rollout %d changed rollout %d: %v -> %v", k, j, i, res[i].Advantages, res2[i].Advantages)
			}
		}
	}
}
