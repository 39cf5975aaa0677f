package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
	"github.com/stretchr/testify/require"

	"niuma/engine"
)

func TestFilterLog(t *testing.T) {
	m := engine.StderrMarker
	text := "epoch 1 loss 0.5\nepoch 1 acc 0.8\n" + m + "\nWARNING: Loss scale\nTraceback\n"
	tests := []struct {
		name, q, want string
	}{
		{"no search keeps everything", "", text},
		{"blank search keeps everything", "  ", text},
		{"lines on both sides, ignoring case", "loss", "epoch 1 loss 0.5\n" + m + "\nWARNING: Loss scale\n"},
		{"stdout only drops the marker", "acc", "epoch 1 acc 0.8\n"},
		{"stderr only keeps the marker", "traceback", m + "\nTraceback\n"},
		{"nothing matches", "nan", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, filterLog(text, tt.q))
		})
	}
}

func TestPickLogStage(t *testing.T) {
	run := engine.RunInfo{Stages: []engine.StageInfo{
		{Name: "prep", State: engine.Succeeded, Attempts: 1},
		{Name: "train", State: engine.Running, Attempts: 2},
		{Name: "eval", State: engine.Queued},
	}}
	done := engine.RunInfo{Stages: []engine.StageInfo{
		{Name: "prep", State: engine.Succeeded, Attempts: 1},
		{Name: "train", State: engine.Failed, Attempts: 3},
		{Name: "eval", State: engine.Cancelled},
	}}
	queued := engine.RunInfo{Stages: []engine.StageInfo{{Name: "prep", State: engine.Queued}}}
	tests := []struct {
		name   string
		run    engine.RunInfo
		chosen string
		want   string
	}{
		{"the user's choice", run, "eval", "eval"},
		{"the running stage", run, "", "train"},
		{"a choice the run lacks", run, "gone", "train"},
		{"the last stage that started", done, "", "train"},
		{"nothing started: the first", queued, "", "prep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, ok := pickLogStage(tt.run, tt.chosen)
			require.True(t, ok)
			require.Equal(t, tt.want, st.Name)
		})
	}
	_, ok := pickLogStage(engine.RunInfo{}, "")
	require.False(t, ok, "a run without stages has no log")
}

func TestLogPaneFollowsTheRunningStage(t *testing.T) {
	now := time.Now()
	run := engine.RunInfo{ID: "r1", Template: "t", State: engine.Running, CreatedAt: now, StartedAt: now,
		Stages: []engine.StageInfo{
			{Name: "prep", State: engine.Succeeded, Attempts: 1, MaxAttempts: 1},
			{Name: "train", State: engine.Running, Attempts: 2, MaxAttempts: 3},
		}}
	b := &fakeBackend{runs: []engine.RunInfo{run}, logs: map[string]string{
		"r1/prep/1":  "prepared 1797 images\n",
		"r1/train/2": "epoch 1 loss 0.5\nepoch 1 acc 0.8\n" + engine.StderrMarker + "\nwarning: slow loader\n",
	}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	require.False(t, v.detail.body.Visible(), "no run selected: no log")
	v.list.Select(0)
	v.Reload(context.Background())

	d := v.detail
	require.True(t, d.body.Visible())
	require.Equal(t, "train", d.logStage.Selected, "the running stage is shown first")
	require.Equal(t, []string{"prep", "train"}, d.logStage.Options)
	require.Contains(t, d.logText.Text, "epoch 1 acc 0.8")
	require.Contains(t, d.logText.Text, "warning: slow loader", "stderr shows too")

	test.Type(d.logSearch, "loss")
	require.Equal(t, "epoch 1 loss 0.5", d.logText.Text)
	d.logSearch.SetText("nan")
	require.Empty(t, d.logText.Text)
	require.Equal(t, `No line contains "nan".`, d.logNote.Text)
	d.logSearch.SetText("")

	// The stage writes more: the next reload shows it.
	b.mu.Lock()
	b.logs["r1/train/2"] = "epoch 1 loss 0.5\nepoch 2 loss 0.4\n"
	b.mu.Unlock()
	v.Reload(context.Background())
	require.Contains(t, d.logText.Text, "epoch 2 loss 0.4")

	// The search stays on across reloads.
	test.Type(d.logSearch, "epoch 2")
	v.Reload(context.Background())
	require.Equal(t, "epoch 2 loss 0.4", d.logText.Text)
	d.logSearch.SetText("")

	// Picking a finished stage reads its log once, not on every reload.
	d.logStage.SetSelected("prep")
	v.Reload(context.Background())
	require.Equal(t, "prepared 1797 images", d.logText.Text)
	b.mu.Lock()
	before := len(b.logReads)
	b.mu.Unlock()
	v.Reload(context.Background())
	v.Reload(context.Background())
	b.mu.Lock()
	require.Len(t, b.logReads, before, "a finished attempt's log is not read again")
	b.mu.Unlock()
	require.Equal(t, "prepared 1797 images", d.logText.Text)
}

func TestLogPaneSaysWhyThereIsNoLog(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Running, CreatedAt: now,
		Stages: []engine.StageInfo{
			{Name: "prep", State: engine.Running, Attempts: 1, MaxAttempts: 1},
			{Name: "train", State: engine.Queued, MaxAttempts: 1},
		}}}}
	v, _ := newTestView(t, b)
	v.SelectRun("r1")
	v.Reload(context.Background())
	require.Equal(t, "prep attempt 1 has written nothing yet.", v.detail.logNote.Text)

	v.detail.logStage.SetSelected("train")
	v.Reload(context.Background())
	require.Equal(t, "train has not started yet.", v.detail.logNote.Text)
	require.Empty(t, v.detail.logText.Text)
}

func TestDetailShowsTheGPUsEachStageLastUsed(t *testing.T) {
	now := time.Now()
	b := &fakeBackend{runs: []engine.RunInfo{{ID: "r1", Template: "t", State: engine.Running, CreatedAt: now, StartedAt: now,
		Stages: []engine.StageInfo{
			{Name: "prep", State: engine.Succeeded, Attempts: 1, MaxAttempts: 1,
				History: []engine.AttemptInfo{{Number: 1, State: "succeeded"}}},
			{Name: "train", State: engine.Running, Attempts: 2, MaxAttempts: 2, History: []engine.AttemptInfo{
				{Number: 2, State: "running", GPUs: []string{"2", "3"}},
				{Number: 1, State: "failed", GPUs: []string{"0"}},
			}},
			{Name: "eval", State: engine.Succeeded, Attempts: 1, MaxAttempts: 1,
				History: []engine.AttemptInfo{{Number: 1, State: "succeeded", GPUs: []string{"3"}}}},
		}}}}
	v, _ := newTestView(t, b)
	v.SelectRun("r1")
	v.Reload(context.Background())
	require.True(t, strings.HasSuffix(v.detail.idLine.Text, " · GPU 2, 3"),
		"the latest attempts' GPUs, each once, not a retried attempt's: %q", v.detail.idLine.Text)
	var gpuLines []string
	for _, row := range v.detail.stages.Objects {
		c, ok := row.(*fyne.Container)
		if !ok {
			continue
		}
		for _, o := range c.Objects {
			if l, ok := o.(*widget.Label); ok {
				if i := strings.Index(l.Text, " · GPU "); i >= 0 {
					gpuLines = append(gpuLines, l.Text[i:])
				}
			}
		}
	}
	require.Equal(t, []string{" · GPU 2,3", " · GPU 3"}, gpuLines, "train and eval say theirs; prep had none")
}
