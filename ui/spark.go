package ui

import (
	"image"
	"image/color"
	"math"
)

// sparkSamples is how much utilisation history a GPU card draws: three
// minutes at the board's one refresh a second.
const sparkSamples = 180

// sparkline draws values in [0, 1] (oldest first) into a w×h image: an
// area filled with a translucent c under a line of c. The newest sample is
// at the right edge; a short history is right-aligned, so the line grows
// from the right as the board runs.
func sparkline(values []float64, w, h int, c color.NRGBA) image.Image {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	if w < 2 || h < 2 || len(values) == 0 {
		return img
	}
	fill := c
	fill.A = 0x38
	prev := -1
	for x := range w {
		// the sample under column x, counting back from the right edge
		back := float64(w-1-x) / float64(w-1) * float64(sparkSamples-1)
		i := len(values) - 1 - int(math.Round(back))
		if i < 0 {
			prev = -1
			continue
		}
		v := clamp01(values[i])
		y := (h - 1) - int(math.Round(v*float64(h-1)))
		for yy := y; yy < h; yy++ {
			img.SetNRGBA(x, yy, fill)
		}
		lo, hi := y, y
		if prev >= 0 { // join to the previous column so steep steps stay a line
			lo, hi = min(y, prev), max(y, prev)
		}
		for yy := lo; yy <= hi; yy++ {
			img.SetNRGBA(x, yy, c)
		}
		prev = y
	}
	return img
}
