package tabular

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"niuma/tuner"
)

// FuzzRead checks that a table or a curves file, whatever it holds, is
// read without panicking, and that what is accepted is usable: a valid
// space, and every configuration snapping to itself.
func FuzzRead(f *testing.F) {
	f.Add(tiny)
	f.Add(curvesCSV)
	f.Add("a,x_seed0\n1,2\n1,3\n")
	f.Add("a,b,x_seed0,x_seed1\nu,1,,\nv,2,1,\n")
	f.Add("a,seed,val_acc\n1,1,0.5 0.6\n2,1,nan inf\n")
	f.Add("a,b\n")
	f.Add("\"a\nb\",x_seed0\n1,2\n")
	f.Fuzz(func(t *testing.T, data string) {
		if tb, err := read(strings.NewReader(data)); err == nil {
			require.NoError(t, tb.Space.Validate())
			for k := range tb.rows {
				require.NotEmpty(t, tb.rows[k])
			}
		}
		if c, err := readCurves(strings.NewReader(data), "val_acc", tuner.Maximize); err == nil {
			require.NoError(t, c.Space.Validate())
			require.Positive(t, c.Runs())
		}
	})
}
