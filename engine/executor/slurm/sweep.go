package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"niuma/engine/executor"
)

// sweepFormat is what Sweep asks squeue for; the comment last (it is free
// text, and may hold '|').
const sweepFormat = "%i|%T|%V|%j|%k"

// orphan is one of this install's jobs that Sweep looks at.
type orphan struct {
	ID, State, Name, Comment string
	Submitted                time.Time
}

// parseSweep reads `squeue --noheader --format=sweepFormat`. A submit time
// squeue cannot give ("N/A") is left zero: such a job is never cancelled.
func parseSweep(out []byte) []orphan {
	var jobs []orphan
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.SplitN(strings.TrimRight(line, "\r"), "|", 5)
		if len(f) < 5 || !jobID(f[0]) {
			continue
		}
		j := orphan{ID: f[0], State: stateWord(f[1]), Name: f[3], Comment: f[4]}
		if t, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(f[2]), time.Local); err == nil {
			j.Submitted = t
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// Sweep implements executor.Sweeper: it cancels this install's jobs that
// carry a token no attempt of the archive has (owned: every token the
// archive knows; a Ref names the token in it). Such a job was submitted for
// an attempt nothing will ever follow (its record was lost, or the attempt
// was given up for another), and holds the cluster's GPUs for nothing.
// Only the user's own jobs are looked at (squeue --me), only those whose
// comment names this data directory (Config.Home; with none, Sweep cancels
// nothing), and only those submitted SweepGrace before the call: a younger
// one may be an attempt recorded after owned was listed. A job of a
// recorded attempt is never touched, in whatever state: it is the
// engine's to recover.
func (x *Executor) Sweep(ctx context.Context, owned []string) ([]string, error) {
	home := homeMark(x.cfg.Home)
	if home == "" {
		return nil, nil
	}
	if err := x.Available(ctx); err != nil {
		return nil, err
	}
	cutoff := time.Now().Add(-x.cfg.SweepGrace)
	known := map[string]bool{}
	for _, o := range owned {
		var r ref
		if strings.HasPrefix(o, "{") && json.Unmarshal([]byte(o), &r) == nil && r.Token != "" {
			o = r.Token
		}
		// By the job's name, which the token decides: a token that the
		// comment cannot hold whole (one with spaces) still matches.
		known[jobName(o)] = true
	}
	out, err := x.cmd.Run(ctx, "squeue", "--me", "--noheader", "--format="+sweepFormat)
	if err != nil {
		return nil, fmt.Errorf("list the user's jobs in Slurm's queue: %w", err)
	}
	var cancelled []string
	for _, j := range parseSweep(out) {
		switch {
		case !strings.HasPrefix(j.Comment, "niuma ") || commentField(j.Comment, "home") != home:
			continue // not this install's
		case known[j.Name] || terminal(j.State):
			continue
		case j.Submitted.IsZero() || j.Submitted.After(cutoff):
			continue
		}
		if _, err := x.cmd.Run(ctx, "scancel", j.ID); err != nil && !ended(err) {
			if errors.Is(err, executor.ErrUnavailable) {
				return cancelled, err
			}
			return cancelled, fmt.Errorf("cancel job %s: %w", j.ID, err)
		}
		cancelled = append(cancelled, fmt.Sprintf("Slurm job %s (run %s, stage %s, attempt %s, %s)", j.ID,
			commentField(j.Comment, "run"), commentField(j.Comment, "stage"), commentField(j.Comment, "attempt"), strings.ToLower(j.State)))
	}
	return cancelled, nil
}
