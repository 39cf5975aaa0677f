package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"niuma/engine/executor"
)

// Commands runs Slurm's command-line tools (sbatch, squeue, sacct, scancel,
// sinfo, scontrol). The executor reaches Slurm only through it, the way
// sites and users do, so it works with any Slurm whose tools are on PATH,
// without a REST daemon or a library matching the cluster's version.
type Commands interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// CLI runs the tools from Dir (PATH when empty). Conf, when set, is passed
// as SLURM_CONF: which cluster the tools talk to.
type CLI struct {
	Dir  string
	Conf string
}

// Run implements Commands. A tool that ran and failed gives a *CommandError
// with its stderr; one that cannot reach the controller or the database
// also matches executor.ErrUnavailable.
func (c CLI) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	path := name
	if c.Dir != "" {
		path = filepath.Join(c.Dir, name)
	}
	cmd := exec.CommandContext(ctx, path, args...)
	if c.Conf != "" {
		cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: Slurm's %s is not installed here (install the slurm-client package, or put the cluster's tools on PATH)", executor.ErrUnavailable, name)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	ce := &CommandError{Name: name, Args: args, Stderr: strings.TrimSpace(stderr.String()), Stdout: stdout.Bytes(), Code: -1}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ce.Code = ee.ExitCode()
	}
	return stdout.Bytes(), ce
}

// CommandError is a Slurm tool that ran and failed.
type CommandError struct {
	Name   string
	Args   []string
	Code   int
	Stderr string
	Stdout []byte
}

func (e *CommandError) Error() string {
	msg := e.Stderr
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", e.Code)
	}
	// Slurm's tools prefix their messages with their own name.
	msg = strings.TrimPrefix(msg, e.Name+": ")
	msg = strings.TrimPrefix(msg, "error: ")
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return e.Name + ": " + msg
}

// Is makes errors that say the controller or database cannot be reached
// match executor.ErrUnavailable: the engine keeps stages queued meanwhile.
func (e *CommandError) Is(target error) bool {
	return target == executor.ErrUnavailable && unreachable(e.Stderr)
}

// unreachable reports whether a tool's stderr says Slurm's controller or
// database did not answer (as opposed to refusing a request).
func unreachable(stderr string) bool {
	s := strings.ToLower(stderr)
	for _, m := range []string{
		"unable to contact slurm controller",
		"socket timed out",
		"zero bytes were transmitted",
		"connection refused",
		"problem talking to the database",
		"slurmctld not responding",
		"communication connection failure",
		"unable to establish a connection",
	} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// accountingOff reports whether sacct's error says the cluster keeps no
// accounting (AccountingStorageType=accounting_storage/none).
func accountingOff(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && strings.Contains(strings.ToLower(ce.Stderr), "accounting storage is disabled")
}

// unknownJob reports whether squeue's or scontrol's error says the job id
// is not one the controller knows (never was, or forgot it).
func unknownJob(err error) bool {
	var ce *CommandError
	return errors.As(err, &ce) && strings.Contains(strings.ToLower(ce.Stderr), "invalid job id")
}
