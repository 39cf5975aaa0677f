package report

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
)

// hostileRun carries what a hostile workload and template could write: an
// OSC in a metric key, a CSI in a parameter, a formula in another, raw
// control characters in a log tail.
func hostileRun() Run {
	r := demoRun("20261129-100000-aaaaaa", 0.003, 1)
	r.Params = append(r.Params, Param{"note", "x\x1b[2Jy"}, Param{"cmd", "=HYPERLINK(\"http://evil\")"}, Param{"neg", "-0.5"})
	m := metric("train", "\x1b]0;PWNED\x07loss", 5, 1, 0.1, 3)
	r.Metrics = append(r.Metrics, m)
	return r
}

func TestCSVEscapesControlCharactersAndFormulas(t *testing.T) {
	b, err := CSV(&Report{Runs: []Run{hostileRun()}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(b, "\x1b\x07") {
		t.Fatalf("raw control characters in the CSV")
	}
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v", err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var key bool
	for _, r := range rows[1:] {
		if r[3] == `\x1b]0;PWNED\x07loss` {
			key = true
		}
		if got := r[col["note"]]; got != `x\x1b[2Jy` {
			t.Errorf("note = %q", got)
		}
		if got := r[col["cmd"]]; got != `'=HYPERLINK("http://evil")` {
			t.Errorf("a formula is not neutralised: %q", got)
		}
		if got := r[col["neg"]]; got != "-0.5" {
			t.Errorf("a negative number is text, not a formula: %q", got)
		}
	}
	if !key {
		t.Errorf("the metric key is not escaped visibly")
	}
}

func TestMarkdownEscapesControlCharacters(t *testing.T) {
	r := hostileRun()
	r.State, r.Error = "failed", "stage train failed"
	r.Logs = []LogTail{{Stage: "train", Attempt: 1, Lines: []string{"epoch 1\tok", "\x1b]52;c;cm0gLXJmIH4=\x07 clipboard"}}}
	doc, _, err := Markdown(&Report{Runs: []Run{r}}, Options{NoCurves: true}, "f")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	if strings.ContainsAny(s, "\x1b\x07") {
		t.Fatalf("raw control characters in the Markdown")
	}
	for _, want := range []string{`x\\x1b\[2Jy`, `\\x1b\]0;PWNED\\x07loss`, "epoch 1\tok", `\x1b]52;c;cm0gLXJmIH4=\x07 clipboard`} {
		if !strings.Contains(s, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
}
