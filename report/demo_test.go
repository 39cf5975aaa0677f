package report

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var demoDir = flag.String("demo", "", "write demo reports (run, failed run, comparison) into this folder")

// TestDemo writes sample reports to look at: go test ./report -run Demo -demo /tmp/r
func TestDemo(t *testing.T) {
	if *demoDir == "" {
		t.Skip("pass -demo DIR to write sample reports")
	}
	chinese := demoRun("20261129-100000-c0ffee", 0.003, 1)
	chinese.Template = "数字牛马-ablation"
	chinese.Params = append(chinese.Params, Param{"note", "学习率 warm-up, «tuned» & <checked>"})
	reps := map[string]*Report{
		"run":     {Generated: t0, Runs: []Run{chinese}},
		"failed":  {Generated: t0, Runs: []Run{failedRun()}},
		"compare": comparison(12),
	}
	for name, rep := range reps {
		for _, page := range []string{"a4", "letter"} {
			b, err := PDF(rep, Options{Page: page, FallbackFont: fallbackFont(t)})
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(*demoDir, name+"-"+page+".pdf"), b)
		}
		h, err := HTML(rep, Options{})
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(*demoDir, name+".html"), h)
		md, files, err := Markdown(rep, Options{}, name+"_files")
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(*demoDir, name+".md"), md)
		for _, f := range files {
			write(t, filepath.Join(*demoDir, f.Name), f.Data)
		}
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fallbackFont is a CJK TrueType font when this machine has one.
func fallbackFont(t *testing.T) []byte {
	b, err := os.ReadFile("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf")
	if err != nil {
		t.Log("no Droid Sans Fallback: Chinese prints as ?")
	}
	return b
}
