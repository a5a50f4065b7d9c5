package plan

import "math"

// Posterior is a Beta(Alpha, Beta) belief about a task's pass rate.
type Posterior struct {
	Alpha float64 `json:"alpha"`
	Beta  float64 `json:"beta"`
}

// Mean is the posterior mean pass rate.
func (q Posterior) Mean() float64 { return q.Alpha / (q.Alpha + q.Beta) }

// Obs is the number of outcomes the posterior holds beyond a (1,1) prior.
func (q Posterior) Obs() float64 { return q.Alpha + q.Beta - 2 }

// Informative is the posterior probability that a group of n binary
// outcomes holds both values: 1 - E[p^n] - E[(1-p)^n].
func (q Posterior) Informative(n int) float64 {
	return max(0, 1-moment(q.Alpha, q.Beta, n)-moment(q.Beta, q.Alpha, n))
}

// moment is E[p^k] for p ~ Beta(a, b).
func moment(a, b float64, k int) float64 {
	m := 1.0
	for i := range k {
		m *= (a + float64(i)) / (a + b + float64(i))
	}
	return m
}

// predictive is the beta-binomial probability of x passes in k more
// rollouts under q.
func (q Posterior) predictive(k, x int) float64 {
	lc := lgamma(float64(k+1)) - lgamma(float64(x+1)) - lgamma(float64(k-x+1))
	lb := lbeta(float64(x)+q.Alpha, float64(k-x)+q.Beta) - lbeta(q.Alpha, q.Beta)
	return math.Exp(lc + lb)
}

func lbeta(a, b float64) float64 { return lgamma(a) + lgamma(b) - lgamma(a+b) }

func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}
