package engine

import (
	"context"
	"sync"

	"niuma/engine/template"
	"niuma/metrics"
	"niuma/storage"
)

// metricSources reads a stage's metric sources from its run's template.
// A run's template never changes once submitted, so it is parsed once per
// run, not once per attempt: for a run of thousands of stages, parsing its
// template at every start was most of the engine's work.
func (e *Engine) metricSources(ctx context.Context, runID, stage string) metrics.Sources {
	key := sourceKey{e.store, runID}
	if byStage, ok := runSources.get(key); ok {
		return byStage[stage]
	}
	r, err := e.store.GetRun(ctx, runID)
	if err != nil {
		return metrics.Sources{}
	}
	t, err := template.Parse(r.TemplateSource, []byte(r.TemplateYAML))
	if err != nil {
		return metrics.Sources{}
	}
	byStage := make(map[string]metrics.Sources, len(t.Stages))
	for _, st := range t.Stages {
		byStage[st.Name] = metrics.Sources{Rules: st.Metrics, TensorBoard: st.TensorBoard, CSV: st.CSV}
	}
	runSources.put(key, byStage)
	return byStage[stage]
}

// sourceKey names a run in one store (tests open many).
type sourceKey struct {
	store *storage.DB
	runID string
}

// sourceCache holds the metric sources of the last maxCachedRuns runs
// whose attempts started.
type sourceCache struct {
	mu    sync.Mutex
	m     map[sourceKey]map[string]metrics.Sources
	order []sourceKey // oldest first
}

const maxCachedRuns = 64

var runSources = &sourceCache{m: map[sourceKey]map[string]metrics.Sources{}}

func (c *sourceCache) get(k sourceKey) (map[string]metrics.Sources, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *sourceCache) put(k sourceKey, v map[string]metrics.Sources) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	if len(c.order) >= maxCachedRuns {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[k] = v
	c.order = append(c.order, k)
}
