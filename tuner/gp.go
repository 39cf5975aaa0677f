package tuner

import (
	"math"
	"math/rand/v2"
)

// gp is a Gaussian process over encoded points with a Matérn-5/2 kernel:
// k(a, b) = sf2 · (1 + √5 r + 5/3 r²) · exp(−√5 r), where r² sums
// ((a_d − b_d) / ℓ_d)² over numeric coordinates and [a_d ≠ b_d] / ℓ_d² over
// choices (the distance between one-hot codes, so the kernel stays
// positive definite), plus noise sn2 on the diagonal.
type gp struct {
	cat   []bool
	ls    []float64 // length scale per coordinate
	inv2  []float64 // 1/ℓ²
	sf2   float64   // signal variance
	sn2   float64   // noise variance
	x     [][]float64
	y     []float64
	l     []float64 // Cholesky factor of K + sn2·I (+ jitter)
	alpha []float64 // (K + sn2·I)⁻¹ y
}

const sqrt5 = 2.23606797749979

// Hyperparameter bounds and priors, on [0, 1]-scaled inputs and targets
// warped to normal scores (unit variance). The priors keep a fit on a
// handful of trials sensible: length scales around half the range, the
// signal variance around the targets' variance, little noise.
const (
	minLS, maxLS   = 0.01, 30.0
	priorLSMean    = -0.7 // log 0.5
	priorLSStd     = 1.0
	minSF2, maxSF2 = 0.05, 20.0
	priorSF2Std    = 1.0
	minSN2, maxSN2 = 1e-6, 1.0
	priorSN2Mean   = -6.9 // log 1e-3
	priorSN2Std    = 2.5
	jitter         = 1e-9
	boundPenalty   = 100.0
	maxFitPoints   = 80 // hyperparameters are fitted on at most this many trials
	fitEvaluations = 60 // likelihood evaluations per fit
)

func (g *gp) setHyper(theta []float64) {
	d := len(g.cat)
	if g.ls == nil {
		g.ls = make([]float64, d)
		g.inv2 = make([]float64, d)
	}
	for i := 0; i < d; i++ {
		g.ls[i] = math.Exp(clamp(theta[i], math.Log(minLS), math.Log(maxLS)))
		g.inv2[i] = 1 / (g.ls[i] * g.ls[i])
	}
	g.sf2 = math.Exp(clamp(theta[d], math.Log(minSF2), math.Log(maxSF2)))
	g.sn2 = math.Exp(clamp(theta[d+1], math.Log(minSN2), math.Log(maxSN2)))
}

func clamp(x, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, x)) }

// r2 is the scaled squared distance between a and b.
func (g *gp) r2(a, b []float64) float64 {
	s := 0.0
	for d, w := range g.inv2 {
		if g.cat[d] {
			if a[d] != b[d] {
				s += w
			}
			continue
		}
		t := a[d] - b[d]
		s += t * t * w
	}
	return s
}

func matern(sf2, r2 float64) float64 {
	r := math.Sqrt(r2)
	return sf2 * (1 + sqrt5*r + 5.0/3*r2) * math.Exp(-sqrt5*r)
}

// factor computes the Cholesky factor and alpha for the current points and
// hyperparameters, adding jitter until the matrix factors.
func (g *gp) factor() bool {
	n := len(g.x)
	k := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < i; j++ {
			k[i*n+j] = matern(g.sf2, g.r2(g.x[i], g.x[j]))
		}
	}
	extra := jitter
	for try := 0; try < 8; try++ {
		a := k
		if try > 0 {
			a = make([]float64, n*n)
			copy(a, k)
		}
		for i := 0; i < n; i++ {
			a[i*n+i] = g.sf2 + g.sn2 + extra*g.sf2
		}
		if cholesky(a, n) {
			g.l = a
			g.alpha = make([]float64, n)
			copy(g.alpha, g.y)
			solveLower(g.l, n, g.alpha)
			solveUpperT(g.l, n, g.alpha)
			return true
		}
		if try == 0 {
			k = append([]float64(nil), k...) // keep the kernel for the next try
		}
		extra *= 100
	}
	return false
}

// predict returns the posterior mean and variance at x; kx is scratch of
// length n, left holding L⁻¹ k(X, x).
func (g *gp) predict(x []float64, kx []float64) (mu, v float64) {
	for i, xi := range g.x {
		kx[i] = matern(g.sf2, g.r2(x, xi))
		mu += kx[i] * g.alpha[i]
	}
	solveLower(g.l, len(g.x), kx)
	v = g.sf2
	for _, t := range kx {
		v -= t * t
	}
	return mu, math.Max(v, 1e-12*g.sf2)
}

// weights returns the kriging weights of the observations in the mean at
// x: mu(x) = Σ w_i y_i.
func (g *gp) weights(x []float64) []float64 {
	n := len(g.x)
	w := make([]float64, n)
	for i, xi := range g.x {
		w[i] = matern(g.sf2, g.r2(x, xi))
	}
	solveLower(g.l, n, w)
	solveUpperT(g.l, n, w)
	return w
}

// fitted returns a gp over all of x and y whose hyperparameters maximise
// the marginal likelihood times the priors, fitted on at most maxFitPoints
// of the points (a seeded random subset beyond that, which keeps a
// suggestion fast however long a study runs).
func fitGP(x [][]float64, y []float64, cat []bool, rng *rand.Rand) *gp {
	fx, fy := x, y
	if len(x) > maxFitPoints {
		idx := rng.Perm(len(x))[:maxFitPoints]
		fx = make([][]float64, len(idx))
		fy = make([]float64, len(idx))
		for i, j := range idx {
			fx[i], fy[i] = x[j], y[j]
		}
	}
	theta := fitHyper(fx, fy, cat)
	g := &gp{cat: cat, x: x, y: y}
	g.setHyper(theta)
	if !g.factor() {
		// Cannot happen with the jitter ladder short of NaNs in y; fall
		// back to a very smooth, very noisy model rather than fail.
		g.sn2 = 1
		g.factor()
	}
	return g
}

// fitHyper maximises the log posterior of the hyperparameters
// θ = (log ℓ_1 … log ℓ_d, log sf2, log sn2) with L-BFGS from two starts (the prior's centre, and smooth and noisy).
func fitHyper(x [][]float64, y []float64, cat []bool) []float64 {
	d := len(cat)
	f := newLikelihood(x, y, cat)
	starts := [][]float64{make([]float64, d+2), make([]float64, d+2)}
	for i := 0; i < d; i++ {
		starts[0][i] = priorLSMean
		starts[1][i] = math.Log(2.0)
	}
	starts[0][d], starts[0][d+1] = 0, math.Log(1e-2)
	starts[1][d], starts[1][d+1] = 0, math.Log(1e-1)
	best, bestF := starts[0], math.Inf(1)
	for _, s := range starts {
		x, v := minimize(f.both, s, fitEvaluations/len(starts))
		if v < bestF {
			best, bestF = x, v
		}
	}
	return best
}

// likelihood evaluates the negative log posterior of the hyperparameters
// and its gradient, caching the last evaluation (L-BFGS asks for the value
// and the gradient at the same point).
type likelihood struct {
	x    [][]float64
	y    []float64
	cat  []bool
	n    int
	diff [][]float64 // per coordinate, the squared (or 0/1) difference of each pair i > j
	last []float64
	val  float64
	g    []float64
}

func newLikelihood(x [][]float64, y []float64, cat []bool) *likelihood {
	n, d := len(x), len(cat)
	f := &likelihood{x: x, y: y, cat: cat, n: n, diff: make([][]float64, d)}
	pairs := n * (n - 1) / 2
	for c := 0; c < d; c++ {
		f.diff[c] = make([]float64, 0, pairs)
		for i := 0; i < n; i++ {
			for j := 0; j < i; j++ {
				t := x[i][c] - x[j][c]
				if cat[c] {
					if t != 0 {
						t = 1
					}
					f.diff[c] = append(f.diff[c], t)
				} else {
					f.diff[c] = append(f.diff[c], t*t)
				}
			}
		}
	}
	return f
}

func (f *likelihood) both(theta, grad []float64) float64 {
	f.eval(theta)
	copy(grad, f.g)
	return f.val
}

func (f *likelihood) eval(theta []float64) {
	if f.last != nil && equal(f.last, theta) {
		return
	}
	f.last = append(f.last[:0], theta...)
	n, d := f.n, len(f.cat)
	if f.g == nil {
		f.g = make([]float64, d+2)
	}
	for i := range f.g {
		f.g[i] = 0
	}
	inv2 := make([]float64, d)
	for c := 0; c < d; c++ {
		inv2[c] = math.Exp(-2 * theta[c])
	}
	sf2, sn2 := math.Exp(theta[d]), math.Exp(theta[d+1])
	pairs := n * (n - 1) / 2
	kp := make([]float64, pairs) // k of each pair
	gp := make([]float64, pairs) // (5/3)·sf2·(1+√5r)·exp(−√5r): ∂k/∂log ℓ_c = gp·diff_c/ℓ_c²
	k := make([]float64, n*n)
	p := 0
	for i := 0; i < n; i++ {
		for j := 0; j < i; j++ {
			r2 := 0.0
			for c := 0; c < d; c++ {
				r2 += f.diff[c][p] * inv2[c]
			}
			r := math.Sqrt(r2)
			e := math.Exp(-sqrt5 * r)
			kp[p] = sf2 * (1 + sqrt5*r + 5.0/3*r2) * e
			gp[p] = 5.0 / 3 * sf2 * (1 + sqrt5*r) * e
			k[i*n+j] = kp[p]
			p++
		}
		k[i*n+i] = sf2 + sn2 + jitter*sf2
	}
	if !cholesky(k, n) {
		f.val = 1e10
		return
	}
	alpha := append([]float64(nil), f.y...)
	solveLower(k, n, alpha)
	quad := 0.0
	for _, a := range alpha {
		quad += a * a
	}
	solveUpperT(k, n, alpha)
	logdet := 0.0
	for i := 0; i < n; i++ {
		logdet += math.Log(k[i*n+i])
	}
	nll := 0.5*quad + logdet + 0.5*float64(n)*math.Log(2*math.Pi)

	// Gradient: ∂nll/∂θ = ½ tr((K⁻¹ − ααᵀ) ∂K/∂θ).
	inv := invertFromCholesky(k, n)
	diag := 0.0
	p = 0
	sumK := 0.0
	for i := 0; i < n; i++ {
		for j := 0; j < i; j++ {
			w := inv[i*n+j] - alpha[i]*alpha[j]
			// Off-diagonal pairs appear twice in the trace.
			wg := w * gp[p]
			for c := 0; c < d; c++ {
				f.g[c] += wg * f.diff[c][p] * inv2[c]
			}
			sumK += 2 * w * kp[p]
			p++
		}
		diag += inv[i*n+i] - alpha[i]*alpha[i]
	}
	f.g[d] = 0.5 * (sumK + diag*sf2)
	f.g[d+1] = 0.5 * diag * sn2

	// Priors (Gaussian in log space) and soft bounds.
	prior := func(i int, mean, std, lo, hi float64) {
		t := (theta[i] - mean) / std
		nll += 0.5 * t * t
		f.g[i] += t / std
		if theta[i] < lo {
			nll += boundPenalty * (lo - theta[i]) * (lo - theta[i])
			f.g[i] -= 2 * boundPenalty * (lo - theta[i])
		}
		if theta[i] > hi {
			nll += boundPenalty * (theta[i] - hi) * (theta[i] - hi)
			f.g[i] += 2 * boundPenalty * (theta[i] - hi)
		}
	}
	for c := 0; c < d; c++ {
		prior(c, priorLSMean, priorLSStd, math.Log(minLS), math.Log(maxLS))
	}
	prior(d, 0, priorSF2Std, math.Log(minSF2), math.Log(maxSF2))
	prior(d+1, priorSN2Mean, priorSN2Std, math.Log(minSN2), math.Log(maxSN2))
	f.val = nll
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
