package ui

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"strings"
	"sync"

	"niuma/engine"
	"niuma/plot"
)

// curveWidth and curveHeight are the run view's chart size, in points.
const curveWidth, curveHeight = 560, 260

// metricName is how the run view names a metric: "stage/key".
func metricName(p engine.Point) string { return p.Stage + "/" + p.Key }

// pickMetric chooses the curve to draw: the user's choice when the run has
// it, else a loss, else an accuracy, else the first metric.
func pickMetric(pts []engine.Point, chosen string) (stage, key string) {
	for _, p := range pts {
		if metricName(p) == chosen {
			return p.Stage, p.Key
		}
	}
	for _, want := range []string{"loss", "acc"} {
		for _, p := range pts {
			if strings.Contains(p.Key, want) {
				return p.Stage, p.Key
			}
		}
	}
	if len(pts) > 0 {
		return pts[0].Stage, pts[0].Key
	}
	return "", ""
}

// curveCache keeps the last chart drawn, so a reload that finds no new
// points (most of them, at several a second) does not draw it again.
type curveCache struct {
	mu  sync.Mutex
	key string
	img image.Image
}

// renderCurve draws one metric of a run with plot.Render, themed like the
// window, and decodes it for a canvas.Image. logY draws the Y axis on a
// log scale (points <= 0 drop out of it).
func (c *curveCache) renderCurve(ctx context.Context, b Backend, runID, stage, key string, dark, logY bool) (image.Image, error) {
	pts, err := b.Series(ctx, runID, stage, key)
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", stage, key, err)
	}
	id := fmt.Sprintf("%s|%s|%s|%t|%t|%d", runID, stage, key, dark, logY, len(pts))
	if len(pts) > 0 {
		last := pts[len(pts)-1]
		id += fmt.Sprintf("|%d|%g", last.Step, last.Value)
	}
	c.mu.Lock()
	if c.key == id {
		img := c.img
		c.mu.Unlock()
		return img, nil
	}
	c.mu.Unlock()
	xs := make([]float64, len(pts))
	ys := make([]float64, len(pts))
	for i, p := range pts {
		xs[i], ys[i] = float64(p.Step), p.Value
	}
	out, err := plot.Render([]plot.Series{{Name: key, X: xs, Y: ys}},
		plot.Options{Title: stage + " · " + key, XLabel: "step", Width: curveWidth, Height: curveHeight, Dark: dark, DPI: 144, LogY: logY}, "png")
	if err != nil {
		return nil, err
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		return nil, fmt.Errorf("decode chart: %w", err)
	}
	c.mu.Lock()
	c.key, c.img = id, img
	c.mu.Unlock()
	return img, nil
}
