package report

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// parseHTML parses a report and fails the test unless it is a document
// with no script, no external reference and no inline event handler.
func parseHTML(t *testing.T, b []byte) *html.Node {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("HTML does not parse: %v", err)
	}
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		if n.Data == "script" || n.Data == "iframe" || n.Data == "object" || n.Data == "link" {
			t.Errorf("HTML has a <%s> element", n.Data)
		}
		for _, a := range n.Attr {
			key, val := strings.ToLower(a.Key), strings.ToLower(strings.TrimSpace(a.Val))
			if strings.HasPrefix(key, "on") {
				t.Errorf("<%s> has an event handler %s=%q", n.Data, a.Key, a.Val)
			}
			if (key == "src" || key == "href" || key == "action" || key == "srcset") && !strings.HasPrefix(val, "#") && !strings.HasPrefix(val, "data:") {
				t.Errorf("<%s %s=%q> refers outside the file", n.Data, a.Key, a.Val)
			}
		}
		if n.Data == "style" && n.FirstChild != nil && strings.Contains(n.FirstChild.Data, "url(") {
			t.Errorf("<style> fetches a url()")
		}
	})
	return doc
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func elements(doc *html.Node, tag string) []*html.Node {
	var out []*html.Node
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == tag {
			out = append(out, n)
		}
	})
	return out
}

func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}

func texts(ns []*html.Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strings.TrimSpace(text(n))
	}
	return out
}

// table returns the cells of the table that follows the heading h2.
func tableAfter(t *testing.T, doc *html.Node, heading string) [][]string {
	t.Helper()
	var found *html.Node
	for _, h := range elements(doc, "h2") {
		if text(h) == heading {
			found = h
		}
	}
	if found == nil {
		t.Fatalf("no heading %q", heading)
	}
	for n := found.NextSibling; n != nil; n = n.NextSibling {
		if n.Type != html.ElementNode {
			continue
		}
		tables := elements(n, "table")
		if len(tables) == 0 {
			if n.Data == "h2" {
				break
			}
			continue
		}
		var rows [][]string
		for _, tr := range elements(tables[0], "tr") {
			rows = append(rows, append(texts(elements(tr, "th")), texts(elements(tr, "td"))...))
		}
		return rows
	}
	t.Fatalf("no table after %q", heading)
	return nil
}

func mustHTML(t *testing.T, rep *Report, opt Options) (*html.Node, []byte) {
	t.Helper()
	b, err := HTML(rep, opt)
	if err != nil {
		t.Fatalf("HTML: %v", err)
	}
	return parseHTML(t, b), b
}

func TestHTMLRunReportStructure(t *testing.T) {
	doc, _ := mustHTML(t, &Report{Runs: []Run{demoRun("20261129-100000-aaaaaa", 0.003, 1)}}, Options{})
	if got := texts(elements(doc, "title")); len(got) != 1 || got[0] != "Run report: digits-mlp 20261129-100000-aaaaaa" {
		t.Errorf("title = %q", got)
	}
	want := []string{"Summary", "Parameters", "Provenance", "Stages", "Metrics", "Anomalies", "GPU usage", "Memory and CPU"}
	if got := texts(elements(doc, "h2")); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("sections = %q, want %q", got, want)
	}
	// val_acc, loss, val_loss (lr is constant and only in the table), then
	// the GPU's utilisation, memory, temperature and power.
	if n := len(elements(doc, "svg")); n != 7 {
		t.Errorf("%d charts, want 7 (val_acc, loss, val_loss and 4 of the GPU)", n)
	}
	stages := tableAfter(t, doc, "Stages")
	if len(stages) != 4 || stages[2][0] != "train" || stages[2][2] != "1/3" || stages[2][3] != "0" {
		t.Errorf("stage table = %q", stages)
	}
	metrics := tableAfter(t, doc, "Metrics")
	if len(metrics) != 5 || metrics[3][1] != "val_acc (objective)" || !strings.HasSuffix(metrics[3][3], "(max)") {
		t.Errorf("metric table = %q", metrics)
	}
	gpus := tableAfter(t, doc, "GPU usage")
	if len(gpus) != 2 || gpus[1][0] != "GPU 0" || !strings.HasSuffix(gpus[1][2], " / 5120 MiB of 49140") ||
		gpus[1][5] != "no" || gpus[1][6] != "none" {
		t.Errorf("GPU table = %q", gpus)
	}
	if strings.Contains(text(doc), "simulated") {
		t.Error("a real GPU is not called simulated")
	}
}

func TestHTMLEscapesRunText(t *testing.T) {
	r := demoRun("20261129-100000-aaaaaa", 0.003, 1)
	r.Template = "<script>alert(1)</script>"
	r.Params = append(r.Params, Param{"note", `say "hi" & <b>bye</b>`})
	r.Metrics[0].Key = `loss<img src=x onerror=alert(2)>`
	r.State, r.Error = "failed", "</dd><script>alert(3)</script>"
	r.Logs = []LogTail{{Stage: "train", Attempt: 1, Lines: []string{"</pre><script>alert(4)</script>"}}}
	doc, raw := mustHTML(t, &Report{Runs: []Run{r}}, Options{})
	if got := text(elements(doc, "h1")[0]); !strings.Contains(got, "<script>alert(1)</script>") {
		t.Errorf("h1 text = %q, want the run's name as text", got)
	}
	params := tableAfter(t, doc, "Parameters")
	if last := params[len(params)-1]; last[1] != `say "hi" & <b>bye</b>` {
		t.Errorf("parameter shown as %q", last[1])
	}
	for _, bad := range []string{"<script>", "<b>bye", "<img"} {
		if bytes.Contains(raw, []byte(bad)) {
			t.Errorf("raw HTML contains %q unescaped", bad)
		}
	}
	if got := texts(elements(doc, "pre")); len(got) != 1 || got[0] != "</pre><script>alert(4)</script>" {
		t.Errorf("log tail = %q", got)
	}
}

func TestHTMLComparison(t *testing.T) {
	rep := comparison(5)
	rep.Runs[2].Params = append(rep.Runs[2].Params, Param{"warmup", 100.0})
	doc, _ := mustHTML(t, rep, Options{})
	want := []string{"Ranking", "Parameters that differ", "Curves", "GPU usage", "Runs"}
	if got := texts(elements(doc, "h2")); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("sections = %q, want %q", got, want)
	}
	rank := tableAfter(t, doc, "Ranking")
	_, ranked := rep.Ranking()
	if len(rank) != 6 {
		t.Fatalf("ranking has %d rows, want header + 5", len(rank))
	}
	for i, rk := range ranked {
		if rank[i+1][1] != rk.Run.ID {
			t.Errorf("rank %d = %s, want %s", i+1, rank[i+1][1], rk.Run.ID)
		}
	}
	// epochs, hidden and optimizer are the same everywhere: only lr and
	// warmup (missing from four runs) differ.
	diff := tableAfter(t, doc, "Parameters that differ")
	if got := strings.Join(diff[0], ","); got != "run,lr,warmup" {
		t.Errorf("diff columns = %s, want run,lr,warmup", got)
	}
	// val_acc, loss, val_loss overlaid; val_acc against lr; the GPUs'
	// utilisation.
	if n := len(elements(doc, "svg")); n != 5 {
		t.Errorf("%d charts, want 5", n)
	}
}

func TestHTMLEdgeRuns(t *testing.T) {
	empty := demoRun("20261129-100000-000000", 0.01, 1)
	empty.Metrics, empty.Params, empty.GPUs, empty.Stages = nil, nil, nil, nil
	big := demoRun("20261129-100000-b19b19", 0.01, 2)
	big.Metrics = []Metric{metric("train", "loss", 1_000_000, 3, 0.1, 5)}
	cases := []struct {
		name   string
		run    Run
		charts int
		says   string
	}{
		{"failed run", failedRun(), 1 + 4, "FloatingPointError: loss is NaN"},
		{"no metrics", empty, 0, "The run reported no metrics."},
		{"a million points", big, 1 + 4, "1000000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc, _ := mustHTML(t, &Report{Runs: []Run{tc.run}}, Options{})
			if n := len(elements(doc, "svg")); n != tc.charts {
				t.Errorf("%d charts, want %d", n, tc.charts)
			}
			if !strings.Contains(text(doc), tc.says) {
				t.Errorf("report does not say %q", tc.says)
			}
		})
	}
}

func TestHTMLOptionsLeaveOut(t *testing.T) {
	doc, _ := mustHTML(t, &Report{Runs: []Run{failedRun()}}, Options{NoCurves: true, NoLogs: true})
	if n := len(elements(doc, "svg")); n != 0 {
		t.Errorf("NoCurves: %d charts", n)
	}
	if n := len(elements(doc, "pre")); n != 0 {
		t.Errorf("NoLogs: %d log blocks", n)
	}
}
