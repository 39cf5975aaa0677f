package predict

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Estimate is what the predictor says about one stage's run time.
type Estimate struct {
	Median time.Duration // 0 = unknown
	// Low and High bound the middle 80% of what it expects (the 10th and
	// 90th percentile).
	Low, High time.Duration
	N         int // finished runs it learned from
	// Params names the parameters the duration was scaled by; empty when
	// it is the median of earlier runs.
	Params []string
	// Beyond is the whole-number parameters (counts, such as epochs or
	// steps) whose value here lies past twice the range the earlier runs
	// span: the estimate is theirs, and this run may be unlike them.
	Beyond []Beyond
}

// Beyond is a parameter of the query outside its history: Value against
// the earlier runs' Min and Max.
type Beyond struct {
	Param           string
	Value, Min, Max float64
}

// Known reports whether there is an estimate at all.
func (e Estimate) Known() bool { return e.Median > 0 }

// String is the estimate as the board shows it: "14 min, from 9 earlier runs".
func (e Estimate) String() string {
	if !e.Known() {
		return "unknown (no earlier runs)"
	}
	if e.N == 0 {
		// No history: the user's own estimates say it.
		return Words(e.Median) + ", from the estimates given"
	}
	runs := "runs"
	if e.N == 1 {
		runs = "run"
	}
	return fmt.Sprintf("%s, from %d earlier %s", Words(e.Median), e.N, runs)
}

// Words writes a duration the way people say it: "40 s", "14 min", "2.5 h".
func Words(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.0f min", d.Minutes())
	case d < 10*time.Hour:
		return fmt.Sprintf("%.1f h", d.Hours())
	}
	return fmt.Sprintf("%.0f h", d.Hours())
}

// Run is one finished attempt the predictor learns from.
type Run struct {
	Key      string             // template and stage, e.g. "digits-mlp/train"
	Params   map[string]float64 // the run's numeric parameters
	Duration time.Duration
}

// Query asks about a stage that has not run yet.
type Query struct {
	Key    string
	Params map[string]float64
}

// Source is what a consumer of predictions needs.
type Source interface {
	Predict(q Query) Estimate
}

// Options tune a Predictor. The zero value is usable.
type Options struct {
	// Window is how many of the most recent runs are kept per key: older
	// code and data say less about the next run. Default 50.
	Window int
	// MinFit is how many runs a key needs before a parameter is fitted;
	// below it the median is used. Default 6.
	MinFit int
	// MaxParams bounds the parameters one fit uses. Default 3.
	MaxParams int
}

// Predictor learns durations per key. It is not safe for concurrent use.
type Predictor struct {
	o       Options
	keys    map[string]*history
	version int
}

// Version counts the runs observed: predictions made at one version hold
// until the next Observe.
func (p *Predictor) Version() int { return p.version }

type history struct {
	runs  []Run // oldest first, at most Window
	model *model
}

// New returns an empty predictor.
func New(o Options) *Predictor {
	if o.Window <= 0 {
		o.Window = 50
	}
	if o.MinFit <= 0 {
		o.MinFit = 6
	}
	if o.MaxParams <= 0 {
		o.MaxParams = 3
	}
	return &Predictor{o: o, keys: map[string]*history{}}
}

// Observe learns from one finished run. Runs of zero or negative duration
// are ignored.
func (p *Predictor) Observe(r Run) {
	if r.Duration <= 0 {
		return
	}
	h := p.keys[r.Key]
	if h == nil {
		h = &history{}
		p.keys[r.Key] = h
	}
	if len(h.runs) == p.o.Window {
		copy(h.runs, h.runs[1:])
		h.runs = h.runs[:len(h.runs)-1]
	}
	h.runs = append(h.runs, r)
	h.model = nil
	p.version++
}

// Predict implements Source.
func (p *Predictor) Predict(q Query) Estimate {
	h := p.keys[q.Key]
	if h == nil || len(h.runs) == 0 {
		return Estimate{}
	}
	if h.model == nil {
		h.model = fit(h.runs, p.o)
	}
	e := h.model.predict(q.Params, len(h.runs))
	e.Beyond = beyond(h.runs, q.Params)
	return e
}

// beyond lists, by name, the whole-number parameters of params that every
// run has, as whole numbers, and that lie past twice their range there.
func beyond(runs []Run, params map[string]float64) []Beyond {
	var out []Beyond
	for name, x := range params {
		if x != math.Trunc(x) || x <= 0 {
			continue
		}
		lo, hi, all := math.Inf(1), math.Inf(-1), true
		for _, r := range runs {
			v, ok := r.Params[name]
			if !ok || v != math.Trunc(v) {
				all = false
				break
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		if all && (x > 2*hi || x < lo/2) {
			out = append(out, Beyond{Param: name, Value: x, Min: lo, Max: hi})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Param < out[j].Param })
	return out
}

// model is one key's fitted prediction: log duration = a + Σ b·log x.
type model struct {
	params    []string
	mean      []float64 // of log x, by param
	coef      []float64 // b, by param
	intercept float64   // a (at the mean of the logs)
	lo, hi    float64   // 10th and 90th percentile of the log errors
	// bounds of log x seen per param: a query outside is clamped, so one
	// odd value cannot send the power law far beyond the evidence.
	minX, maxX []float64
	errs       []float64 // leave-one-out log errors, while the model is chosen
}

func (m *model) predict(params map[string]float64, n int) Estimate {
	y := m.intercept
	for j, name := range m.params {
		x, ok := params[name]
		if !ok || x <= 0 {
			continue // unknown here: predict at the mean
		}
		lx := math.Min(math.Max(math.Log(x), m.minX[j]), m.maxX[j])
		y += m.coef[j] * (lx - m.mean[j])
	}
	d := func(v float64) time.Duration { return time.Duration(math.Exp(v) * float64(time.Second)) }
	return Estimate{Median: d(y), Low: d(y + m.lo), High: d(y + m.hi), N: n, Params: slices.Clone(m.params)}
}

// fit chooses and fits the model for runs.
func fit(runs []Run, o Options) *model {
	n := len(runs)
	y := make([]float64, n)
	for i, r := range runs {
		y[i] = math.Log(r.Duration.Seconds())
	}
	best := medianModel(y)
	if n < o.MinFit {
		widen(best, n)
		return best
	}
	// Forward selection over the parameters that every run has, positive,
	// with at least three distinct values. Each step is judged against the
	// fit without it (the intercept alone at first: the same loss, so the
	// median's robustness is not mistaken for a parameter's effect), and a
	// parameter joins only if it cuts the leave-one-out error by more than
	// chance does on so few runs: 10%, plus 1/n.
	cands := candidates(runs)
	if len(cands) == 0 {
		widen(best, n)
		return best
	}
	var chosen []string
	var fitted *model
	bestErr := looError(linearModel(runs, y, nil))
	need := 0.9 - 1/float64(n)
	for len(chosen) < o.MaxParams {
		var pick string
		var pickModel *model
		pickErr := bestErr * need
		for _, c := range cands {
			if slices.Contains(chosen, c) {
				continue
			}
			m := linearModel(runs, y, append(slices.Clone(chosen), c))
			if m == nil {
				continue
			}
			if e := looError(m); e < pickErr {
				pick, pickModel, pickErr = c, m, e
			}
		}
		if pickModel == nil {
			break
		}
		chosen = append(chosen, pick)
		fitted, bestErr = pickModel, pickErr
	}
	if fitted != nil {
		best = fitted
	}
	widen(best, n)
	return best
}

// widen keeps few runs from claiming a tight estimate: with fewer than 10
// runs the bounds are at least a factor 2 either way.
func widen(m *model, n int) {
	if n < 10 {
		m.lo, m.hi = math.Min(m.lo, -math.Ln2), math.Max(m.hi, math.Ln2)
	}
}

func candidates(runs []Run) []string {
	var names []string
	for k := range runs[0].Params {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		distinct := map[float64]bool{}
		ok := true
		for _, r := range runs {
			v, has := r.Params[k]
			if !has || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				ok = false
				break
			}
			distinct[v] = true
		}
		if ok && len(distinct) >= 3 {
			out = append(out, k)
		}
	}
	return out
}

// medianModel predicts the median of y; its errors are leave-one-out: each
// run against the median of the others.
func medianModel(y []float64) *model {
	s := slices.Clone(y)
	slices.Sort(s)
	n := len(s)
	m := &model{intercept: median(s)}
	if n == 1 {
		return m
	}
	errs := make([]float64, n)
	for i, v := range y {
		// The median of the others: drop one copy of v from the sorted list.
		k, _ := slices.BinarySearch(s, v)
		errs[i] = v - medianWithout(s, k)
	}
	m.lo, m.hi = quantiles(errs)
	m.errs = errs
	return m
}

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianWithout is the median of sorted s without its element k.
func medianWithout(s []float64, k int) float64 {
	n := len(s) - 1
	at := func(i int) float64 {
		if i >= k {
			return s[i+1]
		}
		return s[i]
	}
	if n%2 == 1 {
		return at(n / 2)
	}
	return (at(n/2-1) + at(n/2)) / 2
}

// quantiles are the 10th and 90th percentile of errs (linear interpolation).
func quantiles(errs []float64) (lo, hi float64) {
	s := slices.Clone(errs)
	slices.Sort(s)
	q := func(p float64) float64 {
		x := p * float64(len(s)-1)
		i := int(x)
		if i+1 >= len(s) {
			return s[len(s)-1]
		}
		return s[i] + (x-float64(i))*(s[i+1]-s[i])
	}
	return q(0.1), q(0.9)
}

// looError is the mean absolute leave-one-out log error of a model.
func looError(m *model) float64 {
	var s float64
	for _, e := range m.errs {
		s += math.Abs(e)
	}
	return s / float64(max(len(m.errs), 1))
}

// linearModel fits y on the logs of params by least squares with a small
// ridge on centred logs, and records its leave-one-out errors (from the hat
// matrix: eᵢ / (1 − hᵢᵢ)). nil when the fit is singular.
func linearModel(runs []Run, y []float64, params []string) *model {
	n, k := len(runs), len(params)
	x := make([][]float64, n)
	m := &model{params: params, mean: make([]float64, k), coef: make([]float64, k),
		minX: make([]float64, k), maxX: make([]float64, k)}
	for j := range k {
		m.minX[j], m.maxX[j] = math.Inf(1), math.Inf(-1)
	}
	for i, r := range runs {
		x[i] = make([]float64, k)
		for j, p := range params {
			v := math.Log(r.Params[p])
			x[i][j] = v
			m.mean[j] += v / float64(n)
			m.minX[j], m.maxX[j] = math.Min(m.minX[j], v), math.Max(m.maxX[j], v)
		}
	}
	var ymean float64
	for _, v := range y {
		ymean += v / float64(n)
	}
	// A = XᵀX + λI over centred columns, b = Xᵀ(y − ȳ).
	const lambda = 0.01
	a := make([][]float64, k)
	b := make([]float64, k)
	for j := range k {
		a[j] = make([]float64, k)
		a[j][j] = lambda
	}
	for i := range n {
		for j := range k {
			x[i][j] -= m.mean[j]
		}
		for j := range k {
			b[j] += x[i][j] * (y[i] - ymean)
			for l := range k {
				a[j][l] += x[i][j] * x[i][l]
			}
		}
	}
	inv := invert(a)
	if inv == nil {
		return nil
	}
	for j := range k {
		for l := range k {
			m.coef[j] += inv[j][l] * b[l]
		}
	}
	m.intercept = ymean
	m.errs = make([]float64, n)
	for i := range n {
		pred := ymean
		h := 1 / float64(n) // the intercept's share of the hat matrix
		for j := range k {
			pred += m.coef[j] * x[i][j]
			for l := range k {
				h += x[i][j] * inv[j][l] * x[i][l]
			}
		}
		if h >= 1-1e-9 {
			return nil
		}
		m.errs[i] = (y[i] - pred) / (1 - h)
	}
	m.lo, m.hi = quantiles(m.errs)
	return m
}

// invert returns the inverse of a small symmetric matrix by Gauss–Jordan
// elimination with partial pivoting, or nil when it is singular.
func invert(a [][]float64) [][]float64 {
	k := len(a)
	w := make([][]float64, k)
	for i := range k {
		w[i] = make([]float64, 2*k)
		copy(w[i], a[i])
		w[i][k+i] = 1
	}
	for c := range k {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(w[r][c]) > math.Abs(w[p][c]) {
				p = r
			}
		}
		if math.Abs(w[p][c]) < 1e-12 {
			return nil
		}
		w[c], w[p] = w[p], w[c]
		f := w[c][c]
		for j := range 2 * k {
			w[c][j] /= f
		}
		for r := range k {
			if r != c && w[r][c] != 0 {
				g := w[r][c]
				for j := range 2 * k {
					w[r][j] -= g * w[c][j]
				}
			}
		}
	}
	out := make([][]float64, k)
	for i := range k {
		out[i] = w[i][k:]
	}
	return out
}
