package tuner

import "math"

// Dense linear algebra for the Gaussian process, on row-major n×n slices.
// The matrices are small (a study has hundreds of trials, not thousands),
// so plain loops over contiguous rows are fast enough and keep the room
// free of dependencies.

// cholesky overwrites the lower triangle of the symmetric positive
// definite matrix a with its Cholesky factor L (a = L Lᵀ); the upper
// triangle is zeroed. It reports false when a is not positive definite.
func cholesky(a []float64, n int) bool {
	for i := 0; i < n; i++ {
		ri := a[i*n : i*n+n]
		for j := 0; j <= i; j++ {
			rj := a[j*n : j*n+n]
			s := ri[j]
			for k := 0; k < j; k++ {
				s -= ri[k] * rj[k]
			}
			if j == i {
				if s <= 0 || math.IsNaN(s) {
					return false
				}
				ri[i] = math.Sqrt(s)
			} else {
				ri[j] = s / rj[j]
			}
		}
		for j := i + 1; j < n; j++ {
			ri[j] = 0
		}
	}
	return true
}

// solveLower solves L x = b in place for the lower-triangular L.
func solveLower(l []float64, n int, b []float64) {
	for i := 0; i < n; i++ {
		ri := l[i*n : i*n+i]
		s := b[i]
		for k, v := range ri {
			s -= v * b[k]
		}
		b[i] = s / l[i*n+i]
	}
}

// solveUpperT solves Lᵀ x = b in place for the lower-triangular L.
func solveUpperT(l []float64, n int, b []float64) {
	for i := n - 1; i >= 0; i-- {
		b[i] /= l[i*n+i]
		x := b[i]
		ri := l[i*n : i*n+i]
		for k, v := range ri {
			b[k] -= v * x
		}
	}
}

// invertFromCholesky returns (L Lᵀ)⁻¹ as a full row-major matrix.
func invertFromCholesky(l []float64, n int) []float64 {
	// Li = L⁻¹, lower triangular, column by column.
	li := make([]float64, n*n)
	col := make([]float64, n)
	for j := 0; j < n; j++ {
		for i := range col {
			col[i] = 0
		}
		col[j] = 1
		for i := j; i < n; i++ {
			s := col[i]
			ri := l[i*n : i*n+i]
			for k := j; k < i; k++ {
				s -= ri[k] * col[k]
			}
			col[i] = s / l[i*n+i]
		}
		for i := j; i < n; i++ {
			li[i*n+j] = col[i]
		}
	}
	// K⁻¹ = Liᵀ Li: entry (a, b) = Σ_{k ≥ max(a,b)} Li[k][a] Li[k][b].
	inv := make([]float64, n*n)
	for k := 0; k < n; k++ {
		rk := li[k*n : k*n+k+1]
		for a, va := range rk {
			if va == 0 {
				continue
			}
			ra := inv[a*n : a*n+a+1]
			for b := 0; b <= a; b++ {
				ra[b] += va * rk[b]
			}
		}
	}
	for a := 0; a < n; a++ {
		for b := 0; b < a; b++ {
			inv[b*n+a] = inv[a*n+b]
		}
	}
	return inv
}
