package template

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStageResourcesAndRunFlags(t *testing.T) {
	doc := "name: t\nspot: true\nshare: true\nstages:\n" +
		"  - {name: prep, command: [x], cpus: 0.5, memory: 2GiB}\n" +
		"  - {name: train, command: [x], needs: [prep], gpus: 1, cpus: 4, estimate: 1h30m}\n"
	tm, err := Parse("t.yaml", []byte(doc))
	require.NoError(t, err)
	require.True(t, tm.Spot)
	require.True(t, tm.Share)
	prep, _ := tm.Stage("prep")
	require.Equal(t, int64(500), prep.CPUMilli)
	require.Equal(t, int64(2048), prep.MemMiB)
	require.Zero(t, prep.Estimate)
	train, _ := tm.Stage("train")
	require.Equal(t, int64(4000), train.CPUMilli)
	require.Zero(t, train.MemMiB)
	require.Equal(t, 90*time.Minute, train.Estimate)

	plain, err := Parse("t.yaml", []byte("name: t\nstages:\n  - {name: a, command: [x]}\n"))
	require.NoError(t, err)
	require.False(t, plain.Spot)
	require.False(t, plain.Share)
}

func TestStageResourcesErrors(t *testing.T) {
	for _, tc := range []struct{ name, field, want string }{
		{"cpus zero", "cpus: 0", "cpus must be a positive number of CPUs"},
		{"cpus word", "cpus: many", `cpus must be a positive number of CPUs such as 2 or 0.5, at most 4096 (got "many")`},
		{"cpus list", "cpus: [1]", "cpus must be a number of CPUs such as 2, not a list"},
		{"memory", "memory: lots", `memory "lots" is not a size`},
		{"estimate no unit", "estimate: 40", `estimate "40" has no unit`},
		{"estimate zero", "estimate: 0s", `estimate "0s" must be longer than 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte("name: t\nstages:\n  - {name: a, command: [x], "+tc.field+"}\n"))
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := Parse("t.yaml", []byte("name: t\nspot: maybe\nstages:\n  - {name: a, command: [x]}\n"))
	require.ErrorContains(t, err, `spot must be true or false (got "maybe")`)
}

func FuzzParseCPUs(f *testing.F) {
	for _, s := range []string{"2", "0.5", "", "-1", "1e9", "NaN", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseCPUs(s)
		if err == nil && (m < 0 || m > maxCPUs*1000) {
			t.Fatalf("ParseCPUs(%q) = %d: out of range", s, m)
		}
	})
}
