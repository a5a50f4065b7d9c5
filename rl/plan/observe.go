package plan

import "fmt"

// Observe records a finished rollout of a stride the planner handed out:
// it scores the posterior's prediction (Brier), updates the posterior and
// adds the rollout to the task's attempt.
func (p *Planner) Observe(r Rollout) error {
	t, ok := p.tasks[r.TaskID]
	if !ok || t.att == nil {
		return fmt.Errorf("observe rollout %d of task %q: no open attempt", r.Sample, r.TaskID)
	}
	if r.usable() {
		y := 0.0
		if r.positive() {
			y = 1
		}
		d := t.post.Mean() - y
		p.m.brierSum += d * d
		p.m.BrierN++
	}
	t.update(r)
	t.att.rs = append(t.att.rs, r)
	t.att.new++
	p.m.Rollouts++
	return nil
}

// Next decides a task's attempt after its stride finished: a selected
// group, or the size of the next stride (numbered from the returned
// stride's First), or neither when the planner gives up on the group.
func (p *Planner) Next(id string) (Stride, *Group) {
	t := p.tasks[id]
	if t == nil || t.att == nil {
		return Stride{}, nil
	}
	a := t.att
	if g, rest, ok := p.win.take(a.rs); ok {
		return Stride{}, p.emit(t, g, rest)
	}
	if k := p.strideSize(t, a); k > 0 {
		return p.stride(t, k), nil
	}
	if g, rest, ok := p.win.relaxed().take(a.rs); ok {
		return Stride{}, p.emit(t, g, rest)
	}
	p.close(t)
	p.m.Degenerate++
	return Stride{}, nil
}

func (p *Planner) emit(t *taskState, g, rest []Rollout) *Group {
	grp := &Group{TaskID: t.id, Step: p.step, Rollouts: g, SelectionWeight: t.att.weight}
	for _, r := range g {
		if t.att.fromPool[rkey(r)] {
			grp.Recycled++
		}
		if !t.absorbed[rkey(r)] {
			p.m.used++
		}
	}
	p.m.Groups++
	p.m.Recycled += grp.Recycled
	t.att.rs = rest
	p.close(t)
	return grp
}

// close ends t's attempt, keeping its usable rollouts for the next one.
func (p *Planner) close(t *taskState) {
	var keep []Rollout
	for _, r := range t.att.rs {
		if r.usable() {
			keep = append(keep, r)
		}
	}
	t.pool, t.att = p.capPool(keep), nil
}

// EndStep closes the attempts still open (a budget ran out mid-stride)
// and parks the step's tasks whose posterior is sure.
func (p *Planner) EndStep() {
	for _, id := range p.order {
		t := p.tasks[id]
		if t.att != nil {
			p.close(t)
			p.m.Unfinished++
		}
		m := t.post.Mean()
		if t.last == p.step && t.post.Obs() >= float64(p.o.ParkObs) && (m < p.o.ParkLo || m > p.o.ParkHi) {
			t.parkedUntil = p.step + 1 + p.o.ParkSteps
			p.m.Parked++
		}
	}
}

// Metrics are a planner's running counts.
type Metrics struct {
	Rollouts   int `json:"rollouts"`   // rollouts observed
	Attempts   int `json:"attempts"`   // group attempts started
	Groups     int `json:"groups"`     // groups selected
	Degenerate int `json:"degenerate"` // attempts given up without a group
	Unfinished int `json:"unfinished"` // attempts cut off by the end of a step or budget
	// DegenerateRate is Degenerate / (Groups + Degenerate).
	DegenerateRate float64 `json:"degenerate_rate"`
	// RolloutsPerGroup is Rollouts / Groups.
	RolloutsPerGroup float64 `json:"rollouts_per_group"`
	Recycled         int     `json:"recycled"` // surplus rollouts that joined a later group
	Surplus          int     `json:"surplus"`  // surplus rollouts kept in pools now
	Expired          int     `json:"expired"`  // surplus dropped (policy too old, pool full)
	// Wasted is the observed rollouts in no selected group.
	Wasted int `json:"wasted"`
	Parked int `json:"parked"` // times a task was parked
	// Brier is the mean squared error of the posterior mean as a forecast
	// of each usable rollout's outcome, made just before it was observed.
	Brier  float64 `json:"brier"`
	BrierN int     `json:"brier_n"`

	used     int
	brierSum float64
}

// Metrics returns the counts so far.
func (p *Planner) Metrics() Metrics {
	m := p.m
	if d := m.Groups + m.Degenerate; d > 0 {
		m.DegenerateRate = float64(m.Degenerate) / float64(d)
	}
	if m.Groups > 0 {
		m.RolloutsPerGroup = float64(m.Rollouts) / float64(m.Groups)
	}
	if m.BrierN > 0 {
		m.Brier = m.brierSum / float64(m.BrierN)
	}
	for _, t := range p.tasks {
		m.Surplus += len(t.pool)
	}
	m.Wasted = m.Rollouts - m.used
	return m
}

// TaskState is a task as the planner sees it.
type TaskState struct {
	TaskID      string    `json:"task_id"`
	Posterior   Posterior `json:"posterior"`
	Mean        float64   `json:"mean"`
	Informative float64   `json:"informative"` // P(a group of N is mixed)
	ParkedUntil int       `json:"parked_until,omitempty"`
	Surplus     int       `json:"surplus"`
}

// Tasks returns every task's state, in the order they were added.
func (p *Planner) Tasks() []TaskState {
	out := make([]TaskState, 0, len(p.order))
	for _, id := range p.order {
		t := p.tasks[id]
		out = append(out, TaskState{TaskID: id, Posterior: t.post, Mean: t.post.Mean(),
			Informative: t.post.Informative(p.o.N), ParkedUntil: t.parkedUntil, Surplus: len(t.pool)})
	}
	return out
}
