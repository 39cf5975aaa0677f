package app

import (
	"os"

	"niuma/engine/executor/cgroup"
	"niuma/engine/executor/local"
)

// cgroupSubtree is the cgroup subtree Niuma's attempts get their groups
// in: niuma/ at the top of each hierarchy as root, or in the delegated
// cgroup a user started niuma in.
const cgroupSubtree = "niuma"

// cgroupsEnv turns cgroups off (NIUMA_CGROUPS=off): attempts' processes
// are then found by their token, as where no cgroup can be had.
const cgroupsEnv = "NIUMA_CGROUPS"

// localExecutor is the local executor, with a cgroup per attempt where
// this machine gives one (Mode says which is in force, and why).
func localExecutor() *local.Executor {
	lx := local.New()
	if v := os.Getenv(cgroupsEnv); v == "off" || v == "0" || v == "false" {
		lx.NoCgroup = cgroupsEnv + "=" + v
		return lx
	}
	t, err := cgroup.Detect(cgroupSubtree)
	if err != nil {
		lx.NoCgroup = err.Error()
		return lx
	}
	lx.Cgroups = t
	return lx
}
