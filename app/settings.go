package app

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"niuma/engine/executor/slurm"
)

// Settings are what a site sets once for every run, in
// $NIUMA_HOME/settings.yaml: how the shepherd places stages here (see
// ShepherdSettings) and where Slurm jobs go:
//
//	slurm:
//	  partition: gpu            # default: the cluster's default partition
//	  account: mylab            # default: your default account
//	  qos: normal               # default: the account's default QOS
//	  conf: /etc/slurm/slurm.conf   # SLURM_CONF: which cluster (default: Slurm's own)
//	  shared_dirs: [/scratch]   # mounted at the same path on every node
//	  sbatch_args: [--constraint=a100]
//	  checkpoint_warning: 2m    # SIGTERM this long before a stage's time limit
//
// NIUMA_SLURM_PARTITION, NIUMA_SLURM_ACCOUNT and NIUMA_SLURM_QOS override
// the file; a template's runtime: {kind: slurm, partition: …} overrides
// both for its stages.
type Settings struct {
	Slurm    SlurmSettings
	Shepherd ShepherdSettings // policy, CPUs and memory: see ShepherdSettings
}

// SlurmSettings configure the slurm executor.
type SlurmSettings struct {
	Partition, Account, QOS string
	Conf                    string
	SharedDirs              []string
	SbatchArgs              []string
	CheckpointWarning       time.Duration
}

// settingsFile is where Settings live in a data directory.
func settingsFile(home string) string { return filepath.Join(home, "settings.yaml") }

var slurmSettingFields = []string{"partition", "account", "qos", "conf", "shared_dirs", "sbatch_args", "checkpoint_warning"}

// loadSettings reads the data directory's settings.yaml (none: defaults)
// and the environment's overrides. Errors name the line and what to fix.
func loadSettings(home string) (Settings, error) {
	var s Settings
	path := settingsFile(home)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return s, err
	default:
		if s, err = parseSettings(path, b); err != nil {
			return s, err
		}
	}
	for env, to := range map[string]*string{
		"NIUMA_SLURM_PARTITION": &s.Slurm.Partition,
		"NIUMA_SLURM_ACCOUNT":   &s.Slurm.Account,
		"NIUMA_SLURM_QOS":       &s.Slurm.QOS,
	} {
		if v, ok := os.LookupEnv(env); ok {
			*to = strings.TrimSpace(v)
		}
	}
	return s, nil
}

func parseSettings(path string, b []byte) (Settings, error) {
	var s Settings
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		return s, fmt.Errorf("%s: %v", path, err)
	}
	if len(doc.Content) == 0 {
		return s, nil
	}
	root := doc.Content[0]
	bad := func(n *yaml.Node, format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", path, n.Line, fmt.Sprintf(format, args...))
	}
	if root.Kind != yaml.MappingNode {
		return s, bad(root, "settings must be a mapping, e.g. slurm: {partition: gpu}")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "shepherd" {
			var err error
			if s.Shepherd, err = parseShepherdSettings(v, bad); err != nil {
				return s, err
			}
			continue
		}
		if k.Value != "slurm" {
			return s, bad(k, "unknown setting %q (settings are: slurm, shepherd)", k.Value)
		}
		if v.Kind != yaml.MappingNode {
			return s, bad(v, "slurm must be a mapping, e.g. slurm: {partition: gpu, account: mylab}")
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			f, val := v.Content[j], v.Content[j+1]
			var err error
			switch f.Value {
			case "partition", "account", "qos", "conf":
				if val.Kind != yaml.ScalarNode {
					return s, bad(val, "slurm: %s must be a name, not a list or mapping", f.Value)
				}
				to := map[string]*string{"partition": &s.Slurm.Partition, "account": &s.Slurm.Account, "qos": &s.Slurm.QOS, "conf": &s.Slurm.Conf}[f.Value]
				*to = strings.TrimSpace(val.Value)
			case "shared_dirs":
				s.Slurm.SharedDirs, err = stringList(val)
				for _, d := range s.Slurm.SharedDirs {
					if !filepath.IsAbs(d) {
						return s, bad(val, "slurm: shared_dirs must be absolute paths (got %q)", d)
					}
				}
			case "sbatch_args":
				s.Slurm.SbatchArgs, err = stringList(val)
				for _, a := range s.Slurm.SbatchArgs {
					if !strings.HasPrefix(a, "-") {
						return s, bad(val, "slurm: sbatch_args are sbatch options such as --constraint=a100 (got %q)", a)
					}
				}
			case "checkpoint_warning":
				s.Slurm.CheckpointWarning, err = time.ParseDuration(val.Value)
				if err == nil && s.Slurm.CheckpointWarning < 0 {
					err = errors.New("negative")
				}
				if err != nil {
					return s, bad(val, "slurm: checkpoint_warning must be a duration such as 2m (got %q)", val.Value)
				}
			default:
				return s, bad(f, "unknown slurm setting %q (slurm settings are: %s)", f.Value, strings.Join(slurmSettingFields, ", "))
			}
			if err != nil {
				return s, bad(val, "slurm: %s %v", f.Value, err)
			}
		}
	}
	return s, nil
}

func stringList(n *yaml.Node) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errors.New("must be a list, e.g. [a, b]")
	}
	var out []string
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode {
			return nil, errors.New("must be a list of plain values")
		}
		out = append(out, c.Value)
	}
	return slices.Clip(out), nil
}

// slurmExecutor is the slurm executor the settings describe, or nil when
// Slurm's tools are not on this machine (the reason says so).
func slurmExecutor(home string, s SlurmSettings) (*slurm.Executor, string) {
	if _, err := exec.LookPath("sbatch"); err != nil {
		return nil, "Slurm's tools (sbatch, squeue, sacct) are not installed here: install the slurm-client package and point SLURM_CONF (or slurm: conf in settings.yaml) at your cluster's slurm.conf; scripts/slurm-up.sh starts a one-node cluster on this machine"
	}
	return slurm.New(slurm.CLI{Conf: s.Conf}, slurm.Config{
		Queue:       slurm.Queue{Partition: s.Partition, Account: s.Account, QOS: s.QOS},
		SharedDirs:  s.SharedDirs,
		ExtraArgs:   s.SbatchArgs,
		SignalGrace: s.CheckpointWarning,
		Home:        home, // its jobs name the data directory; the sweep cancels only those
	}), ""
}
