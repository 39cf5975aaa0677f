package engine

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"niuma/engine/template"
	"niuma/metrics"
)

func TestSubmitStoresTheFingerprintAndDerivesTheSeed(t *testing.T) {
	h := newHarness(t)
	e := h.engine() // not driven: submitted runs stay queued
	ctx := context.Background()
	tm := parse(t, dagYAML)
	submit := func(n string, seed int64) RunInfo {
		vals, err := tm.Resolve(map[string]string{"n": n})
		require.NoError(t, err)
		info, err := e.Submit(ctx, RunSpec{Template: tm, Values: vals, Seed: seed})
		require.NoError(t, err)
		stored, err := e.Run(ctx, info.ID)
		require.NoError(t, err)
		require.Regexp(t, `^sha256:[0-9a-f]{64}$`, stored.Fingerprint)
		return stored
	}
	a, b := submit("3", 0), submit("3", 0)
	assert.Equal(t, a.Fingerprint, b.Fingerprint, "same template and values, no seed given")
	assert.Equal(t, a.Seed, b.Seed, "the seed is derived from the inputs")
	assert.NotZero(t, a.Seed)

	prov, err := e.Provenance(ctx, RunSpec{Template: tm, Values: mustResolve(t, tm, "3")})
	require.NoError(t, err)
	assert.Equal(t, a.Fingerprint, prov.Fingerprint, "Provenance predicts Submit")

	assert.NotEqual(t, a.Fingerprint, submit("4", 0).Fingerprint, "another value")
	c := submit("3", 7)
	assert.NotEqual(t, a.Fingerprint, c.Fingerprint, "another seed")
	assert.Equal(t, int64(7), c.Seed)
}

func mustResolve(t *testing.T, tm *template.Template, n string) template.Values {
	t.Helper()
	vals, err := tm.Resolve(map[string]string{"n": n})
	require.NoError(t, err)
	return vals
}

func TestFindDuplicateOnlyCountsSucceededRuns(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	ctx := context.Background()
	for _, tt := range []struct {
		name, yaml string
		want       bool
	}{
		{"succeeded", "name: ok\nstages:\n  - name: a\n    command: [\"true\"]\n", true},
		{"failed", "name: bad\nstages:\n  - name: a\n    command: [\"false\"]\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			info, err := e.Submit(ctx, RunSpec{Template: parse(t, tt.yaml)})
			require.NoError(t, err)
			r := waitDone(t, e, info.ID)
			dup, ok, err := e.FindDuplicate(ctx, r.Fingerprint)
			require.NoError(t, err)
			require.Equal(t, tt.want, ok)
			if ok {
				assert.Equal(t, info.ID, dup.ID)
			}
		})
	}
	_, ok, err := e.FindDuplicate(ctx, "")
	require.NoError(t, err)
	assert.False(t, ok)
}

// tbFixture is an event file as a TensorBoard SummaryWriter writes it: a
// file_version record, then one scalar per step.
func tbFixture(losses ...float32) []byte {
	var b []byte
	for i, l := range losses {
		var val []byte
		val = protowire.AppendTag(val, 1, protowire.BytesType)
		val = protowire.AppendString(val, "train/loss")
		val = protowire.AppendTag(val, 2, protowire.Fixed32Type)
		val = protowire.AppendFixed32(val, math.Float32bits(l))
		var sum []byte
		sum = protowire.AppendTag(sum, 1, protowire.BytesType)
		sum = protowire.AppendBytes(sum, val)
		var ev []byte
		ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
		ev = protowire.AppendFixed64(ev, math.Float64bits(1.7e9+float64(i)))
		ev = protowire.AppendTag(ev, 2, protowire.VarintType)
		ev = protowire.AppendVarint(ev, uint64(i))
		ev = protowire.AppendTag(ev, 5, protowire.BytesType)
		ev = protowire.AppendBytes(ev, sum)
		b = metrics.AppendTFRecord(b, ev)
	}
	return b
}

func TestTensorBoardScalarsBecomeMetrics(t *testing.T) {
	dir := t.TempDir()
	// Three scalars, then the first bytes of a fourth: the writer was
	// killed mid-record.
	fixture := append(tbFixture(1, 0.5, 0.25), tbFixture(9)[:9]...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "events.bin"), fixture, 0o644))
	path := filepath.Join(dir, "template.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`name: tb
stages:
  - name: train
    command: [sh, -c, 'mkdir -p "$1/tb" && cp "$0" "$1/tb/events.out.tfevents.1700000000.host.1.0"', "${code}/events.bin", "${stage_dir}"]
`), 0o644))
	tm, err := template.ParseFile(path)
	require.NoError(t, err)

	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	info, err := e.Submit(context.Background(), RunSpec{Template: tm})
	require.NoError(t, err)
	r := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, r.State, r.Error)
	series, err := e.Series(context.Background(), r.ID, "train", "train/loss")
	require.NoError(t, err)
	require.Len(t, series, 3)
	assert.Equal(t, int64(2), series[2].Step)
	assert.Equal(t, 0.25, series[2].Value)
	list, err := e.Anomalies(context.Background(), r.ID)
	require.NoError(t, err)
	require.Len(t, list, 1, "the truncated file is recorded once")
	assert.Equal(t, "tensorboard_damaged", list[0].Kind)
	assert.Contains(t, list[0].Message, "truncated")
}

func TestCheckReproducible(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		command string
		flagged bool
	}{
		// The objective follows the seed: two runs with one seed agree.
		{"honours the seed", `echo "{\"step\": 1, \"score\": $NIUMA_SEED}"`, false},
		// The objective is random: the second run disagrees with the first.
		{"ignores the seed", `echo "{\"step\": 1, \"score\": $(od -An -N4 -tu4 /dev/urandom)}"`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tm := parse(t, "name: repro-"+tt.name[:3]+"\nobjective: {metric: score, goal: max}\nstages:\n  - name: a\n    command: [sh, -c, '"+
				tt.command+"']\n")
			var ids []string
			for range 2 {
				info, err := e.Submit(ctx, RunSpec{Template: tm})
				require.NoError(t, err)
				r := waitDone(t, e, info.ID)
				require.Equal(t, Succeeded, r.State, r.Error)
				ids = append(ids, r.ID)
			}
			if !tt.flagged {
				a, err := e.CheckReproducible(ctx, ids[1])
				require.NoError(t, err)
				assert.Nil(t, a)
				return
			}
			// The engine compares on its own when a run succeeds.
			var list []AnomalyInfo
			require.Eventually(t, func() bool {
				list, _ = e.Anomalies(ctx, ids[1])
				return len(list) > 0
			}, 10*time.Second, 20*time.Millisecond)
			require.Len(t, list, 1)
			assert.Equal(t, KindNotReproducible, list[0].Kind)
			assert.Contains(t, list[0].Message, ids[0])
			assert.Contains(t, list[0].Fix, "set all random seeds")
			again, err := e.CheckReproducible(ctx, ids[1])
			require.NoError(t, err)
			assert.Nil(t, again, "raised once")
		})
	}
}

func TestSameResult(t *testing.T) {
	for _, tt := range []struct {
		a, b float64
		want bool
	}{
		{0.9, 0.9, true},
		{0.9, 0.9 + 1e-9, true},
		{0.9, 0.91, false},
		{0, 1e-12, false}, // relative: no absolute slack around 0
		{math.NaN(), math.NaN(), true},
		{math.NaN(), 1, false},
	} {
		assert.Equal(t, tt.want, sameResult(tt.a, tt.b), "%v vs %v", tt.a, tt.b)
	}
}

// A data directory inside the code folder (NIUMA_HOME next to the
// scripts) is not part of the code: the archive changes with every run,
// and reading SQLite's files from the owning process drops its locks.
func TestTheArchiveInsideTheCodeFolderIsNotCode(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	ctx := context.Background()
	tm := parse(t, dagYAML)
	tm.Dir = filepath.Dir(h.home) // the code folder holds the data directory: niuma.db, its log, runs/
	require.NoError(t, os.WriteFile(filepath.Join(tm.Dir, "train.py"), []byte("print(1)\n"), 0o644))
	first, err := e.Submit(ctx, RunSpec{Template: tm, Values: mustResolve(t, tm, "3")})
	require.NoError(t, err)
	_, err = e.Submit(ctx, RunSpec{Template: tm, Values: mustResolve(t, tm, "4")}) // the archive grows
	require.NoError(t, err)
	again, err := e.Submit(ctx, RunSpec{Template: tm, Values: mustResolve(t, tm, "3")})
	require.NoError(t, err)
	assert.Equal(t, first.Fingerprint, again.Fingerprint, "the same code and values, though the archive beside it changed")

	require.NoError(t, os.WriteFile(filepath.Join(tm.Dir, "train.py"), []byte("print(2)\n"), 0o644))
	edited, err := e.Submit(ctx, RunSpec{Template: tm, Values: mustResolve(t, tm, "3")})
	require.NoError(t, err)
	assert.NotEqual(t, first.Fingerprint, edited.Fingerprint, "the code itself still counts")
}
