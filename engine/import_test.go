package engine

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"niuma/metrics"
)

// tfEvent encodes a tensorflow.Event with scalar summaries (simple_value)
// the way TensorBoard writers do.
func tfEvent(wall float64, step int64, tags map[string]float32) []byte {
	var summary []byte
	for tag, v := range tags {
		var val []byte
		val = protowire.AppendTag(val, 1, protowire.BytesType)
		val = protowire.AppendString(val, tag)
		val = protowire.AppendTag(val, 2, protowire.Fixed32Type)
		val = protowire.AppendFixed32(val, mathFloat32bits(v))
		summary = protowire.AppendTag(summary, 1, protowire.BytesType)
		summary = protowire.AppendBytes(summary, val)
	}
	var ev []byte
	ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, mathFloat64bits(wall))
	ev = protowire.AppendTag(ev, 2, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	ev = protowire.AppendTag(ev, 5, protowire.BytesType)
	ev = protowire.AppendBytes(ev, summary)
	return metrics.AppendTFRecord(nil, ev)
}

// hparamsEvent encodes the hparams plugin's session_start_info, as
// SummaryWriter.add_hparams and Keras' hp.KerasCallback write it.
func hparamsEvent(wall float64, hp map[string]any) []byte {
	var ssi []byte
	for k, v := range hp {
		var pv []byte
		switch x := v.(type) {
		case float64:
			pv = protowire.AppendTag(pv, 2, protowire.Fixed64Type)
			pv = protowire.AppendFixed64(pv, mathFloat64bits(x))
		case string:
			pv = protowire.AppendTag(pv, 3, protowire.BytesType)
			pv = protowire.AppendString(pv, x)
		case bool:
			pv = protowire.AppendTag(pv, 4, protowire.VarintType)
			pv = protowire.AppendVarint(pv, protowire.EncodeBool(x))
		}
		var entry []byte
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, k)
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendBytes(entry, pv)
		ssi = protowire.AppendTag(ssi, 1, protowire.BytesType)
		ssi = protowire.AppendBytes(ssi, entry)
	}
	var content []byte
	content = protowire.AppendTag(content, 1, protowire.VarintType)
	content = protowire.AppendVarint(content, 0)
	content = protowire.AppendTag(content, 3, protowire.BytesType)
	content = protowire.AppendBytes(content, ssi)
	var pd []byte
	pd = protowire.AppendTag(pd, 1, protowire.BytesType)
	pd = protowire.AppendString(pd, "hparams")
	pd = protowire.AppendTag(pd, 2, protowire.BytesType)
	pd = protowire.AppendBytes(pd, content)
	var meta []byte
	meta = protowire.AppendTag(meta, 1, protowire.BytesType)
	meta = protowire.AppendBytes(meta, pd)
	var val []byte
	val = protowire.AppendTag(val, 1, protowire.BytesType)
	val = protowire.AppendString(val, "_hparams_/session_start_info")
	val = protowire.AppendTag(val, 9, protowire.BytesType)
	val = protowire.AppendBytes(val, meta)
	var summary []byte
	summary = protowire.AppendTag(summary, 1, protowire.BytesType)
	summary = protowire.AppendBytes(summary, val)
	var ev []byte
	ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, mathFloat64bits(wall))
	ev = protowire.AppendTag(ev, 5, protowire.BytesType)
	ev = protowire.AppendBytes(ev, summary)
	return metrics.AppendTFRecord(nil, ev)
}

func writeEvents(t *testing.T, path string, records ...[]byte) {
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	var b []byte
	for _, r := range records {
		b = append(b, r...)
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// A logdir of several runs comes into the archive: their scalars (all of
// them, also many at one step), their subfolders as key prefixes, their
// hparams as parameters; importing again adds nothing.
func TestImportTensorBoardLogdir(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	logdir := t.TempDir()
	const t0 = 1.69e9
	var dqn [][]byte
	for i := range 500 { // a DQN-style log: everything at step 0
		dqn = append(dqn, tfEvent(t0+float64(i), 0, map[string]float32{"reward": float32(i)}))
	}
	writeEvents(t, filepath.Join(logdir, "dqn", "events.out.tfevents.1.host"), dqn...)
	writeEvents(t, filepath.Join(logdir, "exp_a", "events.out.tfevents.1.host"), hparamsEvent(t0, map[string]any{"lr": 0.01, "optimizer": "adam", "augment": true}))
	writeEvents(t, filepath.Join(logdir, "exp_a", "train", "events.out.tfevents.2.host"),
		tfEvent(t0+1, 0, map[string]float32{"epoch_loss": 1}), tfEvent(t0+2, 1, map[string]float32{"epoch_loss": 0.5}))
	writeEvents(t, filepath.Join(logdir, "exp_a", "validation", "events.out.tfevents.3.host"),
		tfEvent(t0+1, 0, map[string]float32{"epoch_loss": 1.2}), tfEvent(t0+2, 1, map[string]float32{"epoch_loss": 0.7}))

	runs, err := e.ImportTensorBoard(t.Context(), logdir, nil)
	require.NoError(t, err)
	require.Len(t, runs, 2)
	assert.Equal(t, "dqn", runs[0].Folder)
	assert.Equal(t, 500, runs[0].Points, "no point at a shared step is lost")
	assert.Equal(t, map[string]any{"lr": 0.01, "optimizer": "adam", "augment": true}, runs[1].Params)

	info, err := e.Run(t.Context(), runs[1].RunID)
	require.NoError(t, err)
	assert.Equal(t, Succeeded, info.State)
	assert.Equal(t, "adam", info.Params["optimizer"])
	assert.Equal(t, time.Unix(1_690_000_001, 0), info.CreatedAt.Round(time.Second), "the run is dated by its first scalar")
	val, err := e.Series(t.Context(), runs[1].RunID, importStage, "validation/epoch_loss")
	require.NoError(t, err)
	require.Len(t, val, 2)
	assert.InDelta(t, 0.7, val[1].Value, 1e-6)
	series, err := e.MetricSeriesInfo(t.Context(), runs[0].RunID)
	require.NoError(t, err)
	require.Len(t, series, 1)
	assert.Equal(t, int64(500), series[0].Points)
	assert.Equal(t, int64(499), series[0].Repeats)

	again, err := e.ImportTensorBoard(t.Context(), logdir, nil)
	require.NoError(t, err)
	for _, r := range again {
		assert.Contains(t, r.Skipped, "already imported")
	}
	_, err = e.ImportTensorBoard(t.Context(), t.TempDir(), nil)
	assert.ErrorContains(t, err, "no TensorBoard event files")
}

// A stage that writes TensorBoard events with old wall times (a file
// copied in, or a replay) is not hung: the sentinel's clock is arrival.
// (With the events' own times, the hang detector said "no new metric for
// 77000h" on the first tick.)
func TestOldTensorBoardTimesAreNoHang(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	dir := t.TempDir()
	var recs [][]byte
	for i := range 50 {
		recs = append(recs, tfEvent(1.5e9+float64(i), int64(i), map[string]float32{"loss": 1 / float32(i+1)}))
	}
	writeEvents(t, filepath.Join(dir, "events.out.tfevents.1.host"), recs...)
	tm := parse(t, `
name: replay
stages:
  - name: train
    command: [/bin/sh, -c, 'mkdir -p "$NIUMA_RUN_DIR/train/tb" && cp "$0"/events.* "$NIUMA_RUN_DIR/train/tb/" && sleep 2', "`+dir+`"]
`)
	info, err := e.Submit(t.Context(), RunSpec{Template: tm})
	require.NoError(t, err)
	final := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, final.State)
	n, err := h.store.CountMetricPoints(t.Context(), info.ID)
	require.NoError(t, err)
	assert.Equal(t, 50, n)
	evs, err := e.Anomalies(t.Context(), info.ID)
	require.NoError(t, err)
	for _, ev := range evs {
		assert.NotEqual(t, "hang", ev.Kind, ev.Message)
	}
}
