package template

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"
)

var sizeRe = regexp.MustCompile(`^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)$`)

// sizeUnits maps a lower-cased unit to its size in bytes. Binary units
// (KiB, MiB, GiB, TiB and the Kubernetes-style Ki, Mi, Gi, Ti) are powers of
// 1024; decimal ones (KB, MB, GB, TB and K, M, G, T) powers of 1000.
var sizeUnits = map[string]int64{
	"b":   1,
	"k":   1e3,
	"kb":  1e3,
	"ki":  1 << 10,
	"kib": 1 << 10,
	"m":   1e6,
	"mb":  1e6,
	"mi":  1 << 20,
	"mib": 1 << 20,
	"g":   1e9,
	"gb":  1e9,
	"gi":  1 << 30,
	"gib": 1 << 30,
	"t":   1e12,
	"tb":  1e12,
	"ti":  1 << 40,
	"tib": 1 << 40,
}

// maxGPUMemoryMiB bounds gpu_memory (1 EiB) so that sizes stay far from
// int64 overflow when callers convert them to bytes.
const maxGPUMemoryMiB = 1 << 40

// ParseGPUMemory parses a memory size such as "2GiB", "512MiB", "1.5GB",
// "24Gi" or a plain whole number of MiB ("2048"), and returns it in MiB,
// rounded up to a whole MiB. Decimal units go through bytes, so "1GB" is
// 954 MiB. "" is 0 (unspecified). Units are case-insensitive.
func ParseGPUMemory(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	m := sizeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size; write e.g. 2GiB, 512MiB, 1.5GB or a whole number of MiB", s)
	}
	num, unit := m[1], strings.ToLower(m[2])
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%q is not a size; write e.g. 2GiB, 512MiB, 1.5GB or a whole number of MiB", s)
	}
	if unit == "" {
		if !r.IsInt() {
			return 0, fmt.Errorf("%q: a number without a unit means MiB and must be whole; write e.g. %sGiB or a whole number of MiB", s, num)
		}
	} else {
		bytes, ok := sizeUnits[unit]
		if !ok {
			return 0, fmt.Errorf("%q has an unknown unit %q; use MiB, GiB, TiB (powers of 1024) or MB, GB, TB (powers of 1000)", s, m[2])
		}
		r.Mul(r, new(big.Rat).SetInt64(bytes))
		r.Quo(r, new(big.Rat).SetInt64(1<<20))
	}
	// Round up to a whole MiB: a stage needs at least this much.
	q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if rem.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > maxGPUMemoryMiB {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return q.Int64(), nil
}

// parseTimeout parses a stage timeout such as "90s", "30m", "2h" or
// "1h30m". "" and "0" mean no timeout.
func parseTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, numErr := parseFloat(s); numErr == nil {
			return 0, fmt.Errorf("%q has no unit; write e.g. %ss, %sm or %sh", s, s, s, s)
		}
		return 0, fmt.Errorf("%q is not a duration; write a number with a unit such as 90s, 30m, 2h or 1h30m (for days use hours, e.g. 48h)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative; write e.g. 30m, or leave timeout out for none", s)
	}
	return d, nil
}

// memoryValue reads a gpu_memory parameter's value: a size ("4GiB") or a
// whole number of MiB.
func memoryValue(x any) (int64, error) {
	switch v := x.(type) {
	case string:
		return ParseGPUMemory(v)
	default:
		if i, ok := asInt64(v); ok && i >= 0 {
			return i, nil
		}
	}
	return 0, fmt.Errorf("%v is not a size such as 4GiB", x)
}

// NeedsOf is what stage st of a run with values v asks of the GPUs: how
// many, and how much memory on each (MiB). A stage that names parameters
// for them (gpus: ${params.gpus}) takes the run's values; one that does
// not, its fixed fields.
func (t *Template) NeedsOf(st Stage, v Values) (gpus int, memMiB int64, err error) {
	gpus, memMiB = st.GPUs, st.GPUMemoryMiB
	if st.GPUsParam != "" {
		if x, ok := v[st.GPUsParam]; ok {
			n, ok := asInt64(x)
			if !ok || n < 0 || n > maxGPUs {
				return 0, 0, fmt.Errorf("stage %s: gpus = %v (parameter %s) must be a whole number from 0 to %d", st.Name, x, st.GPUsParam, maxGPUs)
			}
			gpus = int(n)
		}
	}
	if st.GPUMemoryParam != "" {
		if x, ok := v[st.GPUMemoryParam]; ok {
			m, err := memoryValue(x)
			if err != nil {
				return 0, 0, fmt.Errorf("stage %s: gpu_memory (parameter %s): %w", st.Name, st.GPUMemoryParam, err)
			}
			memMiB = m
		}
	}
	return gpus, memMiB, nil
}
