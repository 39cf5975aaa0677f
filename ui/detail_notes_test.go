package ui

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"niuma/engine"
)

func TestRunNotesLeadWithTheFailure(t *testing.T) {
	r := engine.RunInfo{State: engine.Failed, Stages: []engine.StageInfo{{Name: "train", State: engine.Failed,
		Failure: &engine.FailureInfo{Attempt: 2, Cause: "shm", Summary: "the DataLoader's worker processes ran out of shared memory (/dev/shm)",
			Fix: "raise the container's shared memory in the template: runtime: {shm_size: 8GiB}", Tail: []string{"a", "b"}}}},
		MetricsWaiting: "12 metric points not yet stored: disk full", ObjectiveMissing: "the objective metric val_acc never appeared"}
	assert.Equal(t, []string{
		"Stage train, attempt 2: the DataLoader's worker processes ran out of shared memory (/dev/shm)",
		"Fix: raise the container's shared memory in the template: runtime: {shm_size: 8GiB}",
		"Last lines of its stderr:", "    a", "    b",
		"Metrics: 12 metric points not yet stored: disk full",
		"Objective: the objective metric val_acc never appeared",
	}, runNotes(r))
}

func TestRunNotesSayHowMetricsWereRead(t *testing.T) {
	r := engine.RunInfo{State: engine.Succeeded, Stages: []engine.StageInfo{{Name: "train", State: engine.Succeeded,
		MetricsRead: []engine.MetricsRead{{Format: "hf-trainer", From: "stdout"}, {Format: "csv", From: "runs/detect/train/results.csv"}}}}}
	assert.Equal(t, []string{
		"Stage train: metrics read as hf-trainer, from stdout",
		"Stage train: metrics read as csv, from runs/detect/train/results.csv",
	}, runNotes(r))
}
