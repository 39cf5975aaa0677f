package ui

import (
	"image/color"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSparkline(t *testing.T) {
	c := color.NRGBA{R: 10, G: 20, B: 30, A: 255}
	empty := color.NRGBA{}
	tests := []struct {
		name   string
		values []float64
		// pixel expectations: x, y, colour
		at []pixel
	}{
		{"full load: the line runs along the top at the right edge", []float64{1, 1, 1}, []pixel{{99, 0, c}, {0, 0, empty}}},
		{"idle: the line lies on the bottom", []float64{0}, []pixel{{99, 19, c}, {99, 0, empty}}},
		{"a full history reaches the left edge", make180(0.5), []pixel{{0, 9, c}, {0, 15, color.NRGBA{R: 10, G: 20, B: 30, A: 0x38}}, {0, 0, empty}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := sparkline(tt.values, 100, 20, c)
			for _, p := range tt.at {
				require.Equal(t, p.want, img.At(p.x, p.y), "pixel %d,%d", p.x, p.y)
			}
		})
	}
	require.Equal(t, 0, sparkline(nil, 100, 20, c).Bounds().Dx()-100, "no history: a blank image of the asked size")
}

// pixel is one expected pixel of a sparkline.
type pixel struct {
	x, y int
	want color.NRGBA
}

func make180(v float64) []float64 {
	out := make([]float64, sparkSamples)
	for i := range out {
		out[i] = v
	}
	return out
}
