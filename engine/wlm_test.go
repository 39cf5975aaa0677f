package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"niuma/engine/template"
)

// The word_language_model template (metrics/testdata) reads pytorch/examples'
// printed tables with its preset. Here its stage prints the real output of
// that script (the same bytes), so no PyTorch training is needed.
func TestWordLanguageModelTemplateCapturesLossLrAndPpl(t *testing.T) {
	out, err := filepath.Abs("../metrics/testdata/word_language_model.stdout")
	require.NoError(t, err)
	tm, err := template.ParseFile("../metrics/testdata/word_language_model.yaml")
	require.NoError(t, err)
	// The same template, with the script's output standing in for the script.
	yaml := strings.Replace(string(tm.YAML), `command: [/usr/bin/python3, "${code}/main.py", --data, "${code}/data/wikitext-2",
              --epochs, "${params.epochs}", --lr, "${params.lr}", --save, "${stage_dir}/model.pt"]`,
		`command: [/bin/cat, "`+out+`"]`, 1)
	require.NotEqual(t, string(tm.YAML), yaml)
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	info, err := e.Submit(t.Context(), RunSpec{Template: parse(t, yaml)})
	require.NoError(t, err)
	final := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, final.State)
	assert.Empty(t, final.ObjectiveMissing, "valid_loss appeared")
	series, err := e.MetricSeriesInfo(t.Context(), info.ID)
	require.NoError(t, err)
	got := map[string]int64{}
	for _, s := range series {
		got[s.Key] = s.Points
	}
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	batchLines := int64(strings.Count(string(raw), "batches |"))
	assert.Equal(t, batchLines, got["loss"])
	assert.Equal(t, batchLines, got["lr"])
	assert.Equal(t, batchLines, got["ppl"])
	assert.Equal(t, int64(3), got["valid_loss"])
}

// A finished run whose objective never appeared says so.
func TestObjectiveThatNeverAppeared(t *testing.T) {
	h := newHarness(t)
	e := h.engine()
	h.drive(e)
	tm := parse(t, `
name: noobj
objective: {metric: val_acc, goal: max}
stages:
  - name: train
    command: [/bin/sh, -c, 'echo "{\"step\": 1, \"loss\": 0.5}"']
`)
	info, err := e.Submit(t.Context(), RunSpec{Template: tm})
	require.NoError(t, err)
	final := waitDone(t, e, info.ID)
	require.Equal(t, Succeeded, final.State)
	assert.Equal(t, "the objective metric val_acc never appeared (the run logged loss); check the objective's name in the template against what the stage reports", final.ObjectiveMissing)
}
