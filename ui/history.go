package ui

import (
	"image"
	"math"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/widget"

	"niuma/gpumon"
	"niuma/plot"
)

// historyChart draws a GPU's utilisation and memory use over the last
// minutes (the sampler's ring), on a time axis that ends now: like
// nvitop's, it says how busy the GPU was, not only how busy it is.
type historyChart struct {
	widget.BaseWidget
	raster *canvas.Raster

	mu       sync.Mutex
	points   []gpumon.Point
	totalMiB int64
	now      time.Time
	span     time.Duration
}

func newHistoryChart() *historyChart {
	h := &historyChart{span: 5 * time.Minute}
	h.raster = canvas.NewRaster(h.generate)
	h.ExtendBaseWidget(h)
	return h
}

func (h *historyChart) set(pts []gpumon.Point, totalMiB int64, now time.Time) {
	h.mu.Lock()
	h.points, h.totalMiB, h.now = pts, totalMiB, now
	h.mu.Unlock()
	h.raster.Refresh()
}

func (h *historyChart) setSpan(d time.Duration) {
	h.mu.Lock()
	h.span = d
	h.mu.Unlock()
	h.raster.Refresh()
}

// series is the history as two lines in percent, X in seconds before now.
func (h *historyChart) series() []plot.Series {
	util := plot.Series{Name: "util %", Slot: 1}
	mem := plot.Series{Name: "memory %", Slot: 2}
	from := h.now.Add(-h.span)
	for _, p := range h.points {
		if p.At.Before(from) {
			continue
		}
		x := p.At.Sub(h.now).Seconds()
		util.X = append(util.X, x)
		util.Y = append(util.Y, float64(p.Util)) // NaN where not reported: a gap
		if h.totalMiB > 0 {
			mem.X = append(mem.X, x)
			mem.Y = append(mem.Y, 100*float64(p.MemUsedMiB)/float64(h.totalMiB))
		}
	}
	return []plot.Series{util, mem}
}

func (h *historyChart) generate(w, hh int) image.Image {
	size := h.Size()
	if w < 2 || hh < 2 || size.Width < 1 {
		return image.NewRGBA(image.Rect(0, 0, max(w, 1), max(hh, 1)))
	}
	scale := float64(w) / float64(size.Width)
	h.mu.Lock()
	series := h.series()
	span := h.span
	h.mu.Unlock()
	img, _, err := plot.RenderImage(series, plot.Options{
		Width: math.Max(64, float64(w)/scale), Height: math.Max(64, float64(hh)/scale), DPI: 72 * scale,
		Dark: isDark(), XTicks: plot.TickDuration, MaxPoints: max(w, 300),
		View: plot.Range{XMin: -span.Seconds(), XMax: 0, YMin: 0, YMax: 100},
	})
	if err != nil {
		return image.NewRGBA(image.Rect(0, 0, w, hh))
	}
	return img
}

func (h *historyChart) MinSize() fyne.Size { return fyne.NewSize(200, 80) }

func (h *historyChart) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(h.raster)
}
