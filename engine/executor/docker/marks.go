package docker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"niuma/engine/executor"
)

// marks are two small files next to an attempt's logs that say what became
// of its container, for a Niuma that finds the container gone:
//
//   - created (.attempt-N.container) is written once the daemon has
//     created the container: the attempt was launched. A container that is
//     gone with no exit mark was removed behind Niuma's back (ErrGone);
//     with neither mark, nothing ever ran under the token (ErrNotLaunched).
//   - exit (.attempt-N.container-exit) is written when the container has
//     ended, before the container is removed: its exit status outlives the
//     container, so a Niuma that died between the removal and recording the
//     end still learns it, and never guesses it.
type marks struct {
	Created string
	Exit    string
}

func attemptMarks(job executor.Job) marks {
	n := strconv.Itoa(job.Attempt)
	return marks{
		Created: filepath.Join(job.StageDir, ".attempt-"+n+".container"),
		Exit:    filepath.Join(job.StageDir, ".attempt-"+n+".container-exit"),
	}
}

// createdMark is what the created mark holds.
type createdMark struct {
	Token     string `json:"token"`
	Container string `json:"container"`
	Name      string `json:"name"`
}

// exitMark is what the exit mark holds.
type exitMark struct {
	Token     string        `json:"token"`
	Container string        `json:"container"`
	Exit      executor.Exit `json:"exit"`
}

// writeMark replaces path with v, durably: a crash leaves the old file or
// the new one, never a torn one.
func writeMark(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record the attempt's container in %s: %w", path, err)
	}
	return nil
}

// readCreated returns the created mark when it names tok.
func readCreated(path, tok string) *createdMark {
	var m createdMark
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &m) != nil || m.Token != tok {
		return nil
	}
	return &m
}

// readExit returns the exit mark when it names tok.
func readExit(path, tok string) *exitMark {
	var m exitMark
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &m) != nil || m.Token != tok {
		return nil
	}
	return &m
}
