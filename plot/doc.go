// Package plot renders metric curves to PNG or SVG bytes with gonum/plot. It
// is shared by the window (ui) and the reports (report) so that a run's
// curves look the same in both.
//
// The package is pure: data in, bytes out. It imports no I/O packages (no
// os, net or database); callers decide where the bytes go.
//
// # Rendering
//
// [Render] draws one line per [Series] (or, with Options.Scatter, a dot per
// point) with a title, axis labels, grid lines and — for more than one
// series — a boxed legend placed in the corner of the plot area that hides
// the fewest points. [Options] selects the size (in points, default
// 640×360), a light or dark theme, log₁₀ X and Y axes, the PNG resolution
// (Options.DPI, for print) and the per-series point budget. Both themes use ten distinguishable colours
// (Tableau 10 in light mode, brighter tints in dark mode); past ten series the
// colours repeat with dash patterns. A series keeps the colour of its index.
//
// Input is forgiving: points with a NaN or ±Inf coordinate are dropped, and so
// are points with Y <= 0 on a log axis. When nothing drawable remains the
// result is an empty chart with the title and a "no data" note, not an error.
// Errors are reserved for an unknown format, a size out of range and a series
// whose X and Y lengths differ.
//
// PNG output is rasterised at [DPI] (96) dots per inch: W×H points become
// round(W·4/3)×round(H·4/3) pixels, so the default chart is 853×480 pixels.
// SVG output is sized in points and names the Liberation Sans font without
// embedding it; viewers without it fall back to a similar sans-serif.
//
// # Interactive charts
//
// [RenderImage] draws the same chart straight into an image and returns
// its [Frame]: where the plot area landed and which data ranges its axes
// show, so that a window maps the pointer to data (hover values, a zoom
// box, a click on a dot) without reading pixels back. Options.View zooms
// (a series is cut to the range before it is downsampled, so the detail
// of the range shows); Series.Faint draws raw values thin behind their
// smoothed copy ([EMA], TensorBoard's de-biased moving average),
// Series.Dashed an earlier attempt, Series.Slot shares a colour;
// Options.XTicks labels X as durations or clock times; MarkNonFinite puts
// a red mark where a value was NaN or ±Inf. [Nearest] finds the point
// under the pointer by binary search. [RenderParallel] draws parallel
// coordinates (one axis per parameter, log or categorical, lines coloured
// from worst to best) with what a click needs to find a line.
//
// # Downsampling
//
// A series longer than Options.MaxPoints (default 2000) is reduced with
// [LTTB], Largest-Triangle-Three-Buckets (Steinarsson 2013), which keeps the
// first and last point and the visually important peaks and troughs. Two
// series of a million points each render in well under a second (see
// BenchmarkRender2x1M); LTTB alone reduces a million points in a few
// milliseconds.
package plot
