// Package slurmtest gives tests the real single-node Slurm clusters that
// scripts/slurm-up.sh starts: one with accounting (slurmdbd, sacct works)
// and one without (the controller forgets a job 2 s after it ends).
package slurmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Cluster is one of the clusters scripts/slurm-up.sh starts.
type Cluster struct {
	Name       string
	Conf       string // SLURM_CONF
	Accounting bool
	Up         string // the command that starts it
}

// The two clusters: both run at once on this machine.
var (
	WithAccounting    = Cluster{Name: "accounting", Conf: "/etc/slurm/slurm.conf", Accounting: true, Up: "scripts/slurm-up.sh"}
	WithoutAccounting = Cluster{Name: "no-accounting", Conf: "/etc/slurm-noacct/slurm.conf", Up: "scripts/slurm-up.sh --no-accounting"}
	Both              = []Cluster{WithAccounting, WithoutAccounting}
)

// RequiredEnv, set to 1 (.ci/run does once slurm-up.sh has brought both
// clusters up), turns a missing cluster from a skip into a failure.
const RequiredEnv = "NIUMA_SLURM_REQUIRED"

// Run runs one of Slurm's tools on cluster c.
func (c Cluster) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = fmt.Errorf("%s: %s", name, strings.TrimSpace(string(ee.Stderr)))
	}
	return out, err
}

// Need skips the test (fails it, with RequiredEnv set) unless cluster c's
// controller answers.
func Need(t testing.TB, c Cluster) {
	t.Helper()
	cli := c
	why := ""
	if _, err := exec.LookPath("sbatch"); err != nil {
		why = "Slurm's tools are not installed"
	} else if _, err := os.Stat(c.Conf); err != nil {
		why = c.Conf + " does not exist"
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := cli.Run(ctx, "scontrol", "ping")
		if err != nil || !strings.Contains(string(out), "is UP") {
			why = "its controller does not answer"
		}
	}
	if why == "" {
		return
	}
	msg := "needs the " + c.Name + " Slurm cluster (" + why + "): start it with " + c.Up
	if os.Getenv(RequiredEnv) == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Cancel cancels jobs a test left behind, by id; errors are ignored (the
// job may have ended).
func Cancel(cli Cluster, ids ...string) {
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = cli.Run(ctx, "scancel", ids...)
}

// Forget waits until the controller no longer knows the job (MinJobAge
// has passed since it ended), or fails the test after d.
func Forget(t testing.TB, cli Cluster, id string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := cli.Run(ctx, "squeue", "--noheader", "--states=all", "--jobs="+id, "--format=%i")
		cancel()
		if (err != nil && strings.Contains(err.Error(), "Invalid job id")) || (err == nil && strings.TrimSpace(string(out)) == "") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Slurm still knows job %s after %s", id, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
