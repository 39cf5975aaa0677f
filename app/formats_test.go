package app

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// formatsCorpus is metrics/testdata/formats/manifest.json (see the metrics
// package's corpus test): the output of training libraries and what it
// must give.
type formatsCorpus struct {
	Cases []struct {
		Name     string `json:"name"`
		Library  string `json:"library"`
		Detected []struct {
			Format string `json:"format"`
			From   string `json:"from"`
		} `json:"detected"`
		Series map[string]struct {
			Points     int64  `json:"points"`
			LastStep   int64  `json:"last_step"`
			StepSource string `json:"step_source"`
		} `json:"series"`
	} `json:"cases"`
}

// Every library's output of the corpus through `niuma run`: a template
// with no metrics: whose stage prints the recorded stdout and stderr and
// writes the library's files into the run's folder. 100% of the series
// and points, at the library's own step, and the format found named by
// `niuma show --json` and `niuma show`; a plain log gives no series and
// show says how to add a pattern.
func TestRunReadsLibrariesOutputWithNoConfiguration(t *testing.T) {
	tempHome(t)
	corpusDir, err := filepath.Abs("../metrics/testdata/formats")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(corpusDir, "manifest.json"))
	require.NoError(t, err)
	var corpus formatsCorpus
	require.NoError(t, json.Unmarshal(b, &corpus))
	require.GreaterOrEqual(t, len(corpus.Cases), 20)

	for _, cs := range corpus.Cases {
		t.Run(cs.Name, func(t *testing.T) {
			dir := filepath.Join(corpusDir, cs.Name)
			tmpl := writeTemplate(t, fmt.Sprintf(`name: format-%s
stages:
  - name: train
    command: [sh, -c, 'if [ -f "$0/stdout" ]; then cat "$0/stdout"; fi; if [ -f "$0/stderr" ]; then cat "$0/stderr" >&2; fi; if [ -d "$0/files" ]; then cp -R "$0/files/." .; fi', %q]
`, strings.ReplaceAll(cs.Name, "_", "-"), dir))
			code, out, errOut := niuma(t, "run", tmpl, "--wait")
			require.Equal(t, 0, code, "%s\n%s", out, errOut)
			id := runID(t, out)

			code, out, errOut = niuma(t, "show", id, "--json")
			require.Equal(t, 0, code, errOut)
			var s struct {
				State  string `json:"state"`
				Stages []struct {
					MetricsRead []struct {
						Format string `json:"format"`
						From   string `json:"from"`
					} `json:"metrics_read"`
				} `json:"stages"`
				Metrics []struct {
					Key        string `json:"key"`
					Points     int64  `json:"points"`
					Step       int64  `json:"last_step"`
					StepSource string `json:"step_source"`
				} `json:"metrics"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &s), out)
			require.Equal(t, "succeeded", s.State)

			want, got := []string{}, []string{}
			for k, v := range cs.Series {
				want = append(want, fmt.Sprintf("%s points=%d last_step=%d step_source=%s", k, v.Points, v.LastStep, v.StepSource))
			}
			for _, m := range s.Metrics {
				got = append(got, fmt.Sprintf("%s points=%d last_step=%d step_source=%s", m.Key, m.Points, m.Step, m.StepSource))
			}
			sort.Strings(want)
			sort.Strings(got)
			assert.Equal(t, want, got, "%s: every series and point, at the library's step", cs.Library)

			wantRead, gotRead := []string{}, []string{}
			for _, d := range cs.Detected {
				wantRead = append(wantRead, d.Format+" from "+d.From)
			}
			require.Len(t, s.Stages, 1)
			for _, m := range s.Stages[0].MetricsRead {
				gotRead = append(gotRead, m.Format+" from "+m.From)
			}
			assert.Equal(t, wantRead, gotRead, "how %s was read", cs.Library)

			code, text, errOut := niuma(t, "show", id)
			require.Equal(t, 0, code, errOut)
			for _, d := range cs.Detected {
				assert.Contains(t, text, "train: metrics read as "+d.Format+", from "+d.From)
			}
			if len(cs.Series) == 0 {
				assert.Contains(t, text, "no metrics captured")
				assert.Contains(t, text, "Add a pattern under the stage's metrics:")
			} else {
				assert.NotContains(t, text, "no metrics captured")
			}
		})
	}
}
