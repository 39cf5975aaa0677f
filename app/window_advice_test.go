//go:build !nowindow

package app

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Templates page's "Suggested next", on the real engine and archive:
// after runs of a template made as a user makes them (`niuma run`), the
// window's backend suggests values inside the template's ranges, with
// what it expects of them and from how many runs; before two, it says
// how many it has.
func TestWindowAdvisesTheNextRunFromTheArchive(t *testing.T) {
	home := tempHome(t)
	path := writeTemplate(t, windowStudyYAML)
	code, _, errOut := niuma(t, "run", path, "--set", "x=0.8", "--wait")
	require.Equal(t, 0, code, errOut)

	s, err := open(io.Discard)
	require.NoError(t, err)
	b := windowBackend{Engine: s.engine, store: s.store, home: s.home}
	ctx := context.Background()
	_, err = b.Advise(ctx, path)
	require.EqualError(t, err, "a suggestion needs 2 succeeded runs of quick that report loss with the same other values; the archive has 1")
	s.close()

	for _, x := range []string{"0.3", "0.6"} {
		code, _, errOut := niuma(t, "run", path, "--set", "x="+x, "--wait")
		require.Equal(t, 0, code, errOut)
	}
	s, err = open(io.Discard)
	require.NoError(t, err)
	defer s.close()
	b = windowBackend{Engine: s.engine, store: s.store, home: s.home}
	a, err := b.Advise(ctx, path)
	require.NoError(t, err)
	require.Equal(t, []string{"x", "y"}, a.Searched)
	require.Regexp(t, `^expected loss -?[0-9.]+ ± [0-9.e+-]+ from 3 runs$`, a.Why)
	tm, err := loadTemplate(home, path)
	require.NoError(t, err)
	vals := map[string]any{}
	for k, v := range a.Values {
		vals[k] = v
	}
	require.NoError(t, tm.Validate(vals), "what it suggests launches as it is: %v", a.Values)
}
