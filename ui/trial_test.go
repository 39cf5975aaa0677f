package ui

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine"
)

// These tests come from a first-use trial of the window (a new user
// driving it under Xvfb); each pins a trap that user fell into.

// A run launched while another is open goes on top of the list and
// shifts the rows down. The highlight must follow the open run, not stay
// on its old row: else it sits on a run the detail does not show, and a
// click on that highlighted row does nothing (the list thinks it is
// already picked).
func TestRunsListHighlightFollowsTheOpenRunWhenRowsShift(t *testing.T) {
	now := time.Now()
	old := engine.RunInfo{ID: "20261202-171722-e42d7d", Template: "digits-mlp", State: engine.Succeeded,
		CreatedAt: now.Add(-time.Minute), Stages: stages(engine.Succeeded)}
	b := &fakeBackend{runs: []engine.RunInfo{old}}
	v, _ := newTestView(t, b)
	v.Reload(context.Background())
	v.list.Select(0)
	v.Reload(context.Background())
	require.Contains(t, v.detail.idLine.Text, old.ID)

	// A new run arrives; the engine lists the newest first.
	fresh := engine.RunInfo{ID: "20261202-171933-ccccef", Template: "digits-mlp", State: engine.Running,
		CreatedAt: now, StartedAt: now, Stages: stages(engine.Running)}
	b.mu.Lock()
	b.runs = []engine.RunInfo{fresh, old}
	b.mu.Unlock()
	v.Reload(context.Background())
	require.Equal(t, 0, v.rowOf(fresh.ID))
	require.Contains(t, v.detail.idLine.Text, old.ID, "the open run stays open")

	// The user clicks the new run, on the row the old one had.
	v.list.Select(v.rowOf(fresh.ID))
	v.Reload(context.Background())
	require.Contains(t, v.detail.idLine.Text, fresh.ID, "a click on the new run's row opens it")
	require.False(t, v.cancel.Disabled(), "and offers to cancel it")
}
