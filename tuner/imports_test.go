package tuner

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The tuner is pure: no file, network, process or clock access, so that
// every decision is a function of its inputs.
func TestTunerImportsNoIO(t *testing.T) {
	allowed := map[string]bool{"errors": true, "fmt": true, "math": true, "math/rand/v2": true, "slices": true, "sort": true, "strconv": true, "strings": true}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			require.True(t, allowed[path], "%s imports %s", f, path)
		}
	}
}
