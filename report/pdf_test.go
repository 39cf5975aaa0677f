package report

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// poppler returns the path of a poppler-utils tool. Outside CI a missing
// tool skips the test (make deps installs it); in CI it fails.
func poppler(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: install poppler-utils (make deps does)", tool)
		}
		t.Skipf("%s is missing: install poppler-utils (make deps does) to check PDFs", tool)
	}
	return p
}

func mustPDF(t *testing.T, rep *Report, opt Options) []byte {
	t.Helper()
	b, err := PDF(rep, opt)
	if err != nil {
		t.Fatalf("PDF: %v", err)
	}
	if !bytes.HasPrefix(b, []byte("%PDF-")) {
		t.Fatalf("output does not start like a PDF: %q", b[:min(len(b), 16)])
	}
	return b
}

// pdfInfo reads a PDF back with poppler: its text, its page count and
// size, and the first page as an image.
type pdfInfo struct {
	text     string
	pages    string
	pageSize string
	first    image.Image
}

func readPDF(t *testing.T, b []byte) pdfInfo {
	t.Helper()
	totext, toppm, info := poppler(t, "pdftotext"), poppler(t, "pdftoppm"), poppler(t, "pdfinfo")
	dir := t.TempDir()
	path := filepath.Join(dir, "r.pdf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var pi pdfInfo
	pi.text = run(totext, "-layout", path, "-")
	for _, l := range strings.Split(run(info, path), "\n") {
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "Pages":
			pi.pages = strings.TrimSpace(v)
		case "Page size":
			pi.pageSize = strings.TrimSpace(v)
		}
	}
	run(toppm, "-r", "40", "-f", "1", "-l", "1", "-png", path, filepath.Join(dir, "p"))
	pngs, _ := filepath.Glob(filepath.Join(dir, "p*.png"))
	if len(pngs) != 1 {
		t.Fatalf("pdftoppm wrote %d images of page 1", len(pngs))
	}
	f, err := os.ReadFile(pngs[0])
	if err != nil {
		t.Fatal(err)
	}
	if pi.first, err = png.Decode(bytes.NewReader(f)); err != nil {
		t.Fatal(err)
	}
	return pi
}

// inked is the share of pixels that are not near white.
func inked(img image.Image) float64 {
	b := img.Bounds()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xe000 || g < 0xe000 || bl < 0xe000 {
				n++
			}
		}
	}
	return float64(n) / float64(b.Dx()*b.Dy())
}

func TestPDFReadsBack(t *testing.T) {
	cjk := demoRun("20261129-100000-c0ffee", 0.003, 1)
	cjk.Template = "数字牛马"
	cjk.Params = append(cjk.Params, Param{"note", "Ünïcode «ok» & <b>"})
	failed := failedRun()
	empty := demoRun("20261129-100000-000000", 0.01, 1)
	empty.Metrics = nil
	big := demoRun("20261129-100000-b19b19", 0.01, 2)
	big.Metrics = []Metric{metric("train", "loss", 1_000_000, 3, 0.1, 5)}
	cases := []struct {
		name  string
		rep   *Report
		page  string
		size  string // pdfinfo's page size, in points
		wants []string
	}{
		{"run on A4", &Report{Runs: []Run{demoRun("20261129-100000-aaaaaa", 0.003, 1)}}, "a4", "595.28 x 841.89 pts (A4)",
			[]string{"Run report: digits-mlp 20261129-100000-aaaaaa", "Stages", "val_acc (objective)", "NVIDIA RTX A6000"}},
		{"run on Letter", &Report{Runs: []Run{demoRun("20261129-100000-aaaaaa", 0.003, 1)}}, "letter", "612 x 792 pts (letter)",
			[]string{"Parameters", "optimizer"}},
		{"Chinese without a fallback font becomes ?", &Report{Runs: []Run{cjk}}, "", "595.28 x 841.89 pts (A4)",
			[]string{"Run report: ???? 20261129-100000-c0ffee", "Ünïcode «ok» & <b>"}},
		{"failed run", &Report{Runs: []Run{failed}}, "a4", "", []string{"failed", "FloatingPointError: loss is NaN", "stopped the attempt"}},
		{"no metrics", &Report{Runs: []Run{empty}}, "a4", "", []string{"The run reported no metrics."}},
		{"a million points", &Report{Runs: []Run{big}}, "a4", "", []string{"1000000"}},
		{"comparison", comparison(30), "a4", "", []string{"Comparison of 30 runs", "Ranking", "Parameters that differ", "The 8 best runs of 30"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pi := readPDF(t, mustPDF(t, tc.rep, Options{Page: tc.page}))
			for _, w := range tc.wants {
				if !strings.Contains(pi.text, w) {
					t.Errorf("PDF text lacks %q", w)
				}
			}
			if tc.size != "" && pi.pageSize != tc.size {
				t.Errorf("page size %q, want %q", pi.pageSize, tc.size)
			}
			if share := inked(pi.first); share < 0.01 {
				t.Errorf("first page is blank: %.3f%% of it inked", share*100)
			}
			if !regexp.MustCompile(`\b1 ?/ ?` + pi.pages + `\b`).MatchString(pi.text) {
				t.Errorf("no page number footer \"1 / %s\"", pi.pages)
			}
		})
	}
}

// droidFallback is a CJK TrueType font many Linux systems have.
const droidFallback = "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf"

func TestPDFFallbackFontDrawsChinese(t *testing.T) {
	ttf, err := os.ReadFile(droidFallback)
	if err != nil {
		t.Skipf("no CJK font at %s (apt-get install fonts-droid-fallback): %v", droidFallback, err)
	}
	r := demoRun("20261129-100000-c0ffee", 0.003, 1)
	r.Template = "数字牛马"
	r.Params = append(r.Params, Param{"note", "学习率 warm-up «ok» 🐂"})
	r.Stages[1].Reason = strings.Repeat("重试", 80) // cut with an ellipsis in the table
	plain := mustPDF(t, &Report{Runs: []Run{r}}, Options{})
	withFont := mustPDF(t, &Report{Runs: []Run{r}}, Options{FallbackFont: ttf})
	if !bytes.Contains(withFont, []byte("utf8"+fontFallback)) {
		t.Errorf("the fallback font is not embedded")
	}
	pi := readPDF(t, withFont)
	for _, w := range []string{"Run report: 数字牛马 20261129-100000-c0ffee", "学习率 warm-up «ok» ?", "重试重试…"} {
		if !strings.Contains(pi.text, w) {
			t.Errorf("PDF text lacks %q", w)
		}
	}
	if share := inked(pi.first); share < 0.01 {
		t.Errorf("first page is blank")
	}
	// The fallback font is embedded only when a string needs it.
	english := mustPDF(t, &Report{Runs: []Run{demoRun("20261129-100000-aaaaaa", 0.003, 1)}}, Options{FallbackFont: ttf})
	if bytes.Contains(english, []byte("utf8"+fontFallback)) {
		t.Errorf("an all-Latin report embeds the fallback font")
	}
	if !bytes.Contains(plain, []byte("utf8"+fontSans)) || bytes.Contains(plain, []byte("utf8"+fontFallback)) {
		t.Errorf("fonts are not named as this test expects (utf8sans, utf8fallback)")
	}
}

func TestPDFRejectsUnknownPage(t *testing.T) {
	_, err := PDF(&Report{Runs: []Run{demoRun("x", 0.01, 1)}}, Options{Page: "a5"})
	if err == nil || !strings.Contains(err.Error(), `unknown page size "a5": use a4 or letter`) {
		t.Errorf("err = %v", err)
	}
}

func TestPDFText(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"Ünïcode «ok» – …": "Ünïcode «ok» – …",
		"数字牛马 run":         "???? run",
		"tab\there":        "tab here",
		"bell\a":           "bell?",
		"emoji 🐂":          "emoji ?",
		"Привет":           "Привет",
	} {
		if got := pdfText(in); got != want {
			t.Errorf("pdfText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFitWidths(t *testing.T) {
	cases := []struct {
		name  string
		want  []float64
		total float64
		out   []float64
	}{
		// everything fits: natural widths
		{"fits", []float64{10, 20, 30}, 100, []float64{10, 20, 30}},
		// fair share 30: 10 keeps its width; 60 and 40 share 90-10=80 as 60:40 → 48, 32
		{"shrinks the wide", []float64{10, 60, 40}, 90, []float64{10, 48, 32}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := fitWidths(tc.want, tc.total)
			for i := range got {
				if d := got[i] - tc.out[i]; d > 1e-9 || d < -1e-9 {
					t.Fatalf("fitWidths(%v, %g) = %v, want %v", tc.want, tc.total, got, tc.out)
				}
			}
		})
	}
}
