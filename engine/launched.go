package engine

import (
	"context"

	"niuma/storage"
)

// LaunchedParams are the parameters run idOrPrefix was launched with: those
// its earliest attempt started with (a sentinel retry may have changed the
// run's parameters since), or the run's own while no attempt has started.
func (e *Engine) LaunchedParams(ctx context.Context, idOrPrefix string) (map[string]any, error) {
	id, err := e.ResolveID(ctx, idOrPrefix)
	if err != nil {
		return nil, err
	}
	r, err := e.store.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	as, err := e.store.Attempts(ctx, id)
	if err != nil {
		return nil, err
	}
	if a, ok := earliest(as); ok {
		return paramMap([]byte(a.Params)), nil
	}
	return paramMap([]byte(r.Params)), nil
}

// AttemptParams are, for each attempt of a stage (by number), the
// parameters it started with. Attempts recorded before Niuma kept them are
// left out.
func (e *Engine) AttemptParams(ctx context.Context, idOrPrefix, stage string) (map[int]map[string]any, error) {
	id, err := e.ResolveID(ctx, idOrPrefix)
	if err != nil {
		return nil, err
	}
	as, err := e.store.Attempts(ctx, id)
	if err != nil {
		return nil, err
	}
	out := map[int]map[string]any{}
	for _, a := range as {
		if a.Stage == stage && a.Params != "" {
			out[a.Number] = paramMap([]byte(a.Params))
		}
	}
	return out, nil
}

// earliest is the first attempt to start that recorded its parameters.
func earliest(as []storage.Attempt) (storage.Attempt, bool) {
	var first storage.Attempt
	found := false
	for _, a := range as {
		if a.Params != "" && (!found || a.StartedAt.Before(first.StartedAt)) {
			first, found = a, true
		}
	}
	return first, found
}
