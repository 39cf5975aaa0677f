package sentinel_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPackageIsPure keeps the sentinel free of I/O: its non-test files may
// import none of these (tests may, to read testdata).
func TestPackageIsPure(t *testing.T) {
	banned := []string{"os", "io", "net", "database", "syscall", "log", "bufio", "niuma/"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, b := range banned {
				if path == b || strings.HasPrefix(path, b+"/") || strings.HasSuffix(b, "/") && strings.HasPrefix(path, b) {
					t.Errorf("%s imports %s: the sentinel must stay pure (streams in, anomalies out)", f, path)
				}
			}
		}
	}
}
