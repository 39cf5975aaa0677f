package plot

import (
	"image/color"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot/font"
)

// theme is a complete colour scheme for one chart.
type theme struct {
	background color.Color
	text       color.Color // title and axis labels
	muted      color.Color // tick labels, "no data" note
	axis       color.Color // axis lines and tick marks
	grid       color.Color
	legendBG   color.Color
	legendEdge color.Color
	palette    []color.Color // series colours, in order
}

func hex(v uint32) color.NRGBA {
	return color.NRGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

func hexA(v uint32, a uint8) color.NRGBA {
	c := hex(v)
	c.A = a
	return c
}

// lightTheme uses the Tableau 10 palette (designed for distinguishable
// categorical series), reordered so that the low-contrast yellow comes late.
var lightTheme = theme{
	background: hex(0xffffff),
	text:       hex(0x1f2328),
	muted:      hex(0x59636e),
	axis:       hex(0x9198a1),
	grid:       hex(0xe8eaed),
	legendBG:   hexA(0xffffff, 0xe6),
	legendEdge: hex(0xd1d9e0),
	palette: []color.Color{
		hex(0x4e79a7), // blue
		hex(0xf28e2b), // orange
		hex(0x59a14f), // green
		hex(0xe15759), // red
		hex(0xb07aa1), // purple
		hex(0x76b7b2), // teal
		hex(0x9c755f), // brown
		hex(0xff9da7), // pink
		hex(0xedc948), // yellow
		hex(0xbab0ac), // grey
	},
}

// darkTheme keeps the same hue order with lighter, more saturated tints that
// stay readable on a near-black background.
var darkTheme = theme{
	background: hex(0x16181d),
	text:       hex(0xe6e8eb),
	muted:      hex(0x9aa4b2),
	axis:       hex(0x5c6370),
	grid:       hex(0x2a2f37),
	legendBG:   hexA(0x1e2128, 0xe6),
	legendEdge: hex(0x3a404b),
	palette: []color.Color{
		hex(0x58a6ff), // blue
		hex(0xf0883e), // orange
		hex(0x56d364), // green
		hex(0xff7b72), // red
		hex(0xd2a8ff), // purple
		hex(0x39c5cf), // teal
		hex(0xc69c6d), // brown
		hex(0xff9bce), // pink
		hex(0xe3b341), // yellow
		hex(0x8b949e), // grey
	},
}

// dashCycles distinguish series beyond the palette's length: series i uses
// palette[i%len] with dashCycles[(i/len)%len(dashCycles)] (lengths in points).
var dashCycles = [][]float64{nil, {6, 3}, {2, 2}, {8, 3, 2, 3}}

var (
	sans     = font.Font{Typeface: "Liberation", Variant: "Sans"}
	sansBold = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}
)
