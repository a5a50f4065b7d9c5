package plan

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
)

// Options configures a [Planner]. Zero fields take the defaults named.
type Options struct {
	N    int     // group size; default 4
	NMax int     // new rollouts one group attempt may launch; default 8
	Lo   float64 // lowest positive share of a group; default 0.25 (with Hi)
	Hi   float64 // highest positive share of a group; default 0.75 (with Lo)
	// Batch is how many tasks a step starts a group for; default 32.
	Batch int
	// Confidence: a next stride is launched only if the posterior gives
	// the group at least this probability of becoming balanceable within
	// NMax; the stride is the smallest that reaches it. Default 0.5.
	Confidence float64
	// Staleness is the weight bonus of a task not scheduled for
	// StaleSteps steps (growing linearly until then); default 0.05, 10.
	Staleness  float64
	StaleSteps int
	// A task whose posterior mean leaves [ParkLo, ParkHi] after at least
	// ParkObs outcomes is parked for ParkSteps steps; defaults 0.02, 0.98,
	// 8, 10.
	ParkLo, ParkHi float64
	ParkObs        int
	ParkSteps      int
	// Prior is the posterior of a task before any outcome; default (1,1).
	Prior Posterior
	// Seed fixes the task sampling; a planner is deterministic given it
	// and the outcomes it observes.
	Seed uint64
}

func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	deff := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.N, 4)
	def(&o.NMax, 8)
	def(&o.Batch, 32)
	def(&o.StaleSteps, 10)
	def(&o.ParkObs, 8)
	def(&o.ParkSteps, 10)
	if o.Lo == 0 && o.Hi == 0 {
		o.Lo, o.Hi = 0.25, 0.75
	}
	deff(&o.Confidence, 0.5)
	deff(&o.Staleness, 0.05)
	deff(&o.ParkLo, 0.02)
	deff(&o.ParkHi, 0.98)
	if o.Prior == (Posterior{}) {
		o.Prior = Posterior{1, 1}
	}
}

// ErrBadOptions is returned by [New] for options no planner can run with.
var ErrBadOptions = errors.New("bad planner options")

// Validate reports options that make no sense, after defaults.
func (o Options) Validate() error {
	w := newWindow(o.N, o.Lo, o.Hi)
	switch {
	case o.N < 1 || o.NMax < 1 || o.Batch < 1:
		return fmt.Errorf("%w: n %d, n_max %d and batch %d must be at least 1", ErrBadOptions, o.N, o.NMax, o.Batch)
	case o.Lo < 0 || o.Hi > 1 || o.Lo > o.Hi || w.minPos > w.maxPos:
		return fmt.Errorf("%w: ratio window [%g, %g] holds no positive count of a group of %d", ErrBadOptions, o.Lo, o.Hi, o.N)
	case o.Confidence <= 0 || o.Confidence > 1:
		return fmt.Errorf("%w: confidence %g not in (0, 1]", ErrBadOptions, o.Confidence)
	case o.Prior.Alpha <= 0 || o.Prior.Beta <= 0:
		return fmt.Errorf("%w: prior (%g, %g) must be positive", ErrBadOptions, o.Prior.Alpha, o.Prior.Beta)
	}
	return nil
}

// Planner decides which tasks get rollouts and how many; see the package
// doc for the rule.
type Planner struct {
	o     Options
	win   window
	rng   *rand.Rand
	tasks map[string]*taskState
	order []string // tasks in the order they were added
	step  int
	m     Metrics
}

type taskState struct {
	id          string
	post        Posterior
	last        int // step last scheduled; -1 never
	parkedUntil int
	issued      int // samples handed out in this run
	pool        []Rollout
	absorbed    map[string]bool // rollouts of earlier runs
	att         *attempt
}

// attempt is one task's group in the making.
type attempt struct {
	rs       []Rollout
	new      int
	fromPool map[string]bool
	weight   float64
}

// Stride asks for Count more rollouts of a task, numbered First on.
type Stride struct {
	TaskID string `json:"task_id"`
	First  int    `json:"first_sample"`
	Count  int    `json:"rollouts"`
}

// Group is a selected training group.
type Group struct {
	TaskID   string    `json:"task_id"`
	Step     int       `json:"step"`
	Rollouts []Rollout `json:"rollouts"`
	// SelectionWeight undoes the planner's preference: the inverse of the
	// task's chance of being scheduled this step, normalised to mean 1
	// over the step's scheduled tasks. Weight losses by it to train on the
	// task distribution instead of the planner's.
	SelectionWeight float64 `json:"selection_weight"`
	Recycled        int     `json:"recycled"` // members kept from an earlier attempt
}

// New returns a planner with no tasks; it panics on options Validate
// rejects (check them first where they come from a user).
func New(o Options) *Planner {
	o.defaults()
	if err := o.Validate(); err != nil {
		panic(err)
	}
	return &Planner{o: o, win: newWindow(o.N, o.Lo, o.Hi), rng: rand.New(rand.NewPCG(o.Seed, 0x6f72636861726421)),
		tasks: map[string]*taskState{}}
}

// AddTask adds a task with prior q (the zero value means Options.Prior).
// Adding a task twice keeps the first.
func (p *Planner) AddTask(id string, q Posterior) {
	if _, ok := p.tasks[id]; ok {
		return
	}
	if q == (Posterior{}) {
		q = p.o.Prior
	}
	p.tasks[id] = &taskState{id: id, post: q, last: -1, absorbed: map[string]bool{}}
	p.order = append(p.order, id)
}

// rkey identifies a rollout within its task.
func rkey(r Rollout) string {
	if r.ID != "" {
		return r.ID
	}
	return "#" + strconv.Itoa(r.Sample)
}

// Absorb takes a rollout of an earlier run: it updates the task's
// posterior and, when usable, joins its pool of surplus rollouts.
func (p *Planner) Absorb(r Rollout) error {
	t, ok := p.tasks[r.TaskID]
	if !ok {
		return fmt.Errorf("absorb rollout of unknown task %q", r.TaskID)
	}
	t.update(r)
	if r.usable() {
		t.absorbed[rkey(r)] = true
		t.pool = p.capPool(append(t.pool, r))
	}
	return nil
}

func (t *taskState) update(r Rollout) {
	switch {
	case r.positive():
		t.post.Alpha++
	case r.usable():
		t.post.Beta++
	}
}

// capPool keeps the newest NMax rollouts of a pool.
func (p *Planner) capPool(rs []Rollout) []Rollout {
	if over := len(rs) - p.o.NMax; over > 0 {
		p.m.Expired += over
		rs = rs[over:]
	}
	return rs
}

// weight is a task's scheduling weight at step.
func (p *Planner) weight(t *taskState, step int) float64 {
	age := p.o.StaleSteps
	if t.last >= 0 {
		age = min(step-t.last, p.o.StaleSteps)
	}
	return t.post.Informative(p.o.N) + p.o.Staleness*float64(age)/float64(p.o.StaleSteps)
}

// Begin starts step at policy version: it samples up to Batch unparked
// tasks in proportion to their weights and returns the first stride of
// each. Attempts still open from the previous step are closed first.
func (p *Planner) Begin(step, version int) []Stride {
	p.EndStep()
	p.step = step
	type cand struct {
		t      *taskState
		w, key float64
	}
	var cs []cand
	sum := 0.0
	for _, id := range p.order {
		t := p.tasks[id]
		if t.parkedUntil > step {
			continue
		}
		w := p.weight(t, step)
		sum += w
		cs = append(cs, cand{t: t, w: w, key: math.Log(1-p.rng.Float64()) / w}) // Efraimidis-Spirakis
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return cmp.Compare(b.key, a.key) })
	k := min(p.o.Batch, len(cs))
	var out []Stride
	var started []*attempt
	inv := 0.0
	for _, c := range cs {
		if len(out) == k {
			break
		}
		s, a := p.start(c.t, version)
		if s.Count == 0 {
			continue
		}
		a.weight = 1 / min(1, float64(k)*c.w/sum)
		inv += a.weight
		started = append(started, a)
		out = append(out, s)
	}
	for _, a := range started {
		a.weight *= float64(len(started)) / inv
	}
	return out
}

// start opens an attempt for t, seeded with its pool's rollouts of a
// policy version within one, and returns its first stride: what is
// missing to a group of N, or the stride rule once the pool has N.
func (p *Planner) start(t *taskState, version int) (Stride, *attempt) {
	a := &attempt{fromPool: map[string]bool{}}
	for _, r := range t.pool {
		if abs(r.PolicyVersion-version) > 1 {
			p.m.Expired++
			continue
		}
		a.rs = append(a.rs, r)
		a.fromPool[rkey(r)] = true
	}
	n := p.o.N - len(a.rs)
	if n <= 0 {
		n = p.strideSize(t, a)
	}
	if n == 0 {
		return Stride{}, nil
	}
	t.pool, t.att, t.last = nil, a, p.step
	p.m.Attempts++
	return p.stride(t, n), a
}

func (p *Planner) stride(t *taskState, n int) Stride {
	s := Stride{TaskID: t.id, First: t.issued, Count: n}
	t.issued += n
	return s
}

// strideSize is the smallest next stride that gives the attempt
// Confidence of becoming balanceable, or 0 when none within NMax does.
func (p *Planner) strideSize(t *taskState, a *attempt) int {
	for k := 1; k <= p.o.NMax-a.new; k++ {
		if p.win.balanceProb(a.rs, k, t.post) >= p.o.Confidence {
			return k
		}
	}
	return 0
}
