package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor/slurm/slurmtest"
)

func TestSettingsFileAndEnvironment(t *testing.T) {
	home := t.TempDir()
	s, err := loadSettings(home)
	require.NoError(t, err, "no settings file: the defaults")
	require.Equal(t, Settings{}, s)

	require.NoError(t, os.WriteFile(settingsFile(home), []byte(`# the lab's cluster
slurm:
  partition: gpu
  account: mylab
  qos: normal
  conf: /etc/slurm/slurm.conf
  shared_dirs: [/shared, /scratch/lab]
  sbatch_args: [--constraint=a100, --reservation=lab]
  checkpoint_warning: 2m
`), 0o644))
	s, err = loadSettings(home)
	require.NoError(t, err)
	require.Equal(t, SlurmSettings{Partition: "gpu", Account: "mylab", QOS: "normal", Conf: "/etc/slurm/slurm.conf",
		SharedDirs: []string{"/shared", "/scratch/lab"}, SbatchArgs: []string{"--constraint=a100", "--reservation=lab"},
		CheckpointWarning: 2 * time.Minute}, s.Slurm)

	t.Setenv("NIUMA_SLURM_PARTITION", "debug")
	t.Setenv("NIUMA_SLURM_QOS", "")
	s, err = loadSettings(home)
	require.NoError(t, err)
	require.Equal(t, "debug", s.Slurm.Partition, "the environment wins")
	require.Equal(t, "", s.Slurm.QOS, "even when it empties a setting")
	require.Equal(t, "mylab", s.Slurm.Account)
}

func TestSettingsErrorsNameTheLine(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"unknown section", "slurm: {}\nsurlm: {}\n", "settings.yaml:2: unknown setting \"surlm\" (settings are: slurm, shepherd)"},
		{"typo in a field", "slurm:\n  partiton: gpu\n", "settings.yaml:2: unknown slurm setting \"partiton\" (slurm settings are: partition, account, qos, conf, shared_dirs, sbatch_args, checkpoint_warning)"},
		{"relative shared dir", "slurm:\n  shared_dirs: [shared]\n", "settings.yaml:2: slurm: shared_dirs must be absolute paths (got \"shared\")"},
		{"not an option", "slurm:\n  sbatch_args: [a100]\n", "settings.yaml:2: slurm: sbatch_args are sbatch options such as --constraint=a100 (got \"a100\")"},
		{"a bad duration", "slurm:\n  checkpoint_warning: soon\n", "settings.yaml:2: slurm: checkpoint_warning must be a duration such as 2m (got \"soon\")"},
		{"a list for a name", "slurm:\n  partition: [a, b]\n", "settings.yaml:2: slurm: partition must be a name, not a list or mapping"},
		{"not a mapping", "- slurm\n", "settings.yaml:1: settings must be a mapping"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			require.NoError(t, os.WriteFile(settingsFile(home), []byte(tt.yaml), 0o644))
			_, err := loadSettings(home)
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
			require.Contains(t, err.Error(), filepath.Join(home, "settings.yaml"))
		})
	}
}

func TestRunOnSlurmWithoutSlurmSaysWhatToInstall(t *testing.T) {
	tempHome(t)
	t.Setenv("PATH", t.TempDir()) // no sbatch anywhere
	code, _, errOut := niuma(t, "run", "digits-mlp", "--executor", "slurm")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "cannot run on Slurm: Slurm's tools (sbatch, squeue, sacct) are not installed here: install the slurm-client package")
}

func TestClusterShowsNodesGPUsAndJobs(t *testing.T) {
	c := slurmtest.WithoutAccounting
	slurmtest.Need(t, c)
	tempHome(t)
	t.Setenv("SLURM_CONF", c.Conf)
	out, err := c.Run(t.Context(), "sbatch", "--parsable", "--hold", "--gres=gpu:2", "--output=/dev/null", "--wrap", "true")
	require.NoError(t, err)
	id := string(out[:len(out)-1])
	t.Cleanup(func() { slurmtest.Cancel(c, id) })
	code, js, errOut := niuma(t, "cluster", "--json")
	require.Equal(t, 0, code, errOut)
	var got struct {
		Nodes []struct {
			Name       string
			GPUs       int
			Partitions []string
		}
		Jobs []struct {
			ID, State, Waiting string
			GPUs               int
		}
		FreeGPUs int `json:"free_gpus"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &got), js)
	require.Len(t, got.Nodes, 1)
	require.Equal(t, 4, got.Nodes[0].GPUs)
	require.Equal(t, []string{"debug"}, got.Nodes[0].Partitions)
	var job *struct {
		ID, State, Waiting string
		GPUs               int
	}
	for i := range got.Jobs {
		if got.Jobs[i].ID == id {
			job = &got.Jobs[i]
		}
	}
	require.NotNil(t, job, js)
	require.Equal(t, 2, job.GPUs)
	require.Contains(t, job.Waiting, "held by its owner")
	code, text, _ := niuma(t, "cluster")
	require.Equal(t, 0, code)
	require.Regexp(t, `vm\s+\S+\s+debug\*\s+\d/4`, text)
}
