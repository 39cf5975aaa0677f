package engine

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"niuma/engine/template"
	"niuma/provenance"
	"niuma/storage"
)

// Provenance is what a run spec will be fingerprinted as: the seed the run
// gets and the fingerprint of all its inputs (see package provenance).
type Provenance struct {
	Fingerprint string
	Seed        int64
	Executor    string // the executor the run would get
	// ExecutorNote says what the user should know about that choice: why
	// the run would wait for Docker, or what a host run goes without.
	ExecutorNote string
	Inputs       provenance.Inputs
}

// ImageDigester is implemented by container backends that can name the
// exact image a reference resolves to here (its ID or repo digest). The
// fingerprint then changes when the image behind a tag is rebuilt; without
// it, only the reference counts.
type ImageDigester interface {
	ImageDigest(ctx context.Context, image string) (string, error)
}

// hashCachePath is where content hashes of code and data files are kept
// between submits (see provenance.Cache).
func hashCachePath(home string) string { return filepath.Join(home, "hashcache.json") }

// Provenance computes the fingerprint a run of spec would have, without
// submitting anything: the CLI and the wizard use it to look for a
// duplicate (FindDuplicate) before they submit.
//
// A spec without a seed gets one derived from its other inputs, so that
// submitting the same template with the same values twice is recognised as
// the same run; give a seed (or pick a random one) to run it again on
// purpose.
func (e *Engine) Provenance(ctx context.Context, spec RunSpec) (Provenance, error) {
	t := spec.Template
	if t == nil {
		return Provenance{}, fmt.Errorf("fingerprint: no template")
	}
	values := spec.Values
	if values == nil {
		values = t.Defaults()
	}
	exName, note := e.chooseExecutor(ctx, spec.Executor, t.Runtime)
	p, err := e.provenance(ctx, t, values, exName, spec.Seed)
	p.ExecutorNote = note
	return p, err
}

func (e *Engine) provenance(ctx context.Context, t *template.Template, values template.Values, exName string, seed int64) (Provenance, error) {
	cache := provenance.LoadCache(hashCachePath(e.opts.Home))
	in := provenance.Inputs{
		Template: provenance.Template{Name: t.Name, Version: t.Version},
		Params:   values.Strings(),
		Runtime:  provenance.Runtime{Kind: exName},
	}
	for _, name := range t.Order() {
		st, _ := t.Stage(name)
		in.Template.Stages = append(in.Template.Stages, provenance.Stage{Name: name, Command: st.Command, Env: st.Env})
	}
	if exName == "docker" {
		in.Runtime.Image = t.Runtime.Image
		if d, ok := e.execs[exName].(ImageDigester); ok && t.Runtime.Image != "" {
			if dg, err := d.ImageDigest(ctx, t.Runtime.Image); err == nil {
				in.Runtime.ImageDigest = dg
			}
		}
	} else {
		seen := map[string]bool{}
		for _, st := range in.Template.Stages {
			if len(st.Command) == 0 || seen[st.Command[0]] {
				continue
			}
			seen[st.Command[0]] = true
			if s := provenance.Interpreter(st.Command[0], cache); s != "" {
				in.Runtime.Interpreters = append(in.Runtime.Interpreters, s)
			}
		}
	}
	data := dataDir(t)
	if t.Dir != "" {
		// Niuma's own data directory may sit inside the code folder (a
		// NIUMA_HOME next to the scripts): the archive is not code, it
		// changes with every run, and reading SQLite's shared-memory file
		// from this process would drop the process's own locks on it.
		var exclude []string
		for _, d := range []string{data, e.opts.Home} {
			if d == "" {
				continue
			}
			if abs, err := filepath.Abs(d); err == nil {
				exclude = append(exclude, abs)
			}
		}
		code, err := provenance.CodeHash(ctx, t.Dir, exclude, cache)
		if err != nil {
			return Provenance{}, fmt.Errorf("fingerprint the code of %s: %w", t.Name, err)
		}
		in.Code = code
	}
	manifest, err := provenance.DataManifest(ctx, data, cache)
	if err != nil {
		return Provenance{}, fmt.Errorf("fingerprint the data of %s: %w", t.Name, err)
	}
	in.Data = manifest
	if err := cache.Save(); err != nil {
		e.log.Warn("save the hash cache; the next submit hashes files again", "err", err)
	}
	if seed == 0 {
		seed = derivedSeed(provenance.Fingerprint(in))
	}
	in.Seed = seed
	return Provenance{Fingerprint: provenance.Fingerprint(in), Seed: seed, Executor: exName, Inputs: in}, nil
}

// derivedSeed turns the fingerprint of a run's inputs without a seed into
// a seed of 31 bits (every framework's seeding function accepts it), never 0.
func derivedSeed(fp string) int64 {
	b, err := hex.DecodeString(strings.TrimPrefix(fp, "sha256:")[:8])
	if err != nil || len(b) < 4 {
		return 1
	}
	s := int64(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) & 0x7fffffff
	if s == 0 {
		s = 1
	}
	return s
}

// FindDuplicate returns the most recent succeeded run with fingerprint fp;
// ok is false when there is none. Failed and cancelled runs never count: a
// run that did not produce a result may always be run again.
func (e *Engine) FindDuplicate(ctx context.Context, fp string) (info RunInfo, ok bool, err error) {
	if fp == "" {
		return RunInfo{}, false, nil
	}
	// Runs come newest first, through the index on runs(fingerprint, state).
	rs, err := e.store.ListRuns(ctx, storage.RunFilter{States: []storage.RunState{storage.RunSucceeded}, Fingerprint: fp})
	if err != nil {
		return RunInfo{}, false, fmt.Errorf("look for an earlier run with the same fingerprint: %w", err)
	}
	for _, r := range rs {
		if r.Fingerprint == fp {
			stages, err := e.store.Stages(ctx, r.ID)
			if err != nil {
				return RunInfo{}, false, err
			}
			return runInfo(r, paramMap([]byte(r.Params)), stages, nil), true, nil
		}
	}
	return RunInfo{}, false, nil
}
