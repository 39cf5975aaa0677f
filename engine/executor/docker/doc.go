// Package docker runs a stage's attempts as Docker containers.
//
// The executor talks to the daemon through API, a narrow interface this
// package owns; Moby implements it with github.com/moby/moby/client, so
// the SDK's churn stays in one file. Containers carry labels naming the
// run, stage, attempt, the attempt's token and the Niuma data directory: a
// restarted Niuma finds its own containers by them (Recover, Sweep) and
// never another install's.
//
// An attempt's container is named after its token, so its identity exists
// before it is launched: Recover finds it with no Ref (the owner died
// before it recorded one), and a second Start of the same attempt adopts
// the container the first made, started or not, instead of making another.
// Two marks next to the attempt's logs outlive the container: that it was
// created, and how it ended (written before the container is removed).
// With them Recover tells a container that ended (its exit code) from one
// removed behind Niuma's back (ErrGone) and from one never created
// (ErrNotLaunched). Sweep never removes the container of an attempt the
// archive records, nor one that runs: only exited containers whose token
// no recorded attempt carries.
//
// Every container is hardened: no privileges, no new privileges, every
// capability dropped (a template may add some of package sandbox's
// allow-list), its own PID and IPC namespaces, a bridge or no network,
// never the host's, the user running Niuma (root only where sandbox.User
// allows it) and a process limit (PidsLimit; a template may only lower
// it). Check applies package sandbox's rules to a job, and Start applies
// them again to every container it creates, the last line: no system path,
// no directory holding a socket. The run directory is mounted read-write
// at /niuma/run (the working directory), the template's directory
// read-only at /niuma/code and its data directory, if it names one,
// read-only at /niuma/data, none of them recursively. GPUs are requested
// by UUID through HostConfig.DeviceRequests (capability "gpu").
//
// A container seen at its process limit ends with a reason that says so;
// one that stays there for PidsStuck (a fork bomb) is stopped. An image
// that is not here is pulled in the background (PrepareImage); meanwhile,
// and after a failed pull, the stage waits with the reason and the way out.
//
// Output is demultiplexed into the same stdout and stderr files the local
// executor writes, so the engine reads metrics the same way. When Niuma
// re-attaches to a container it skips the bytes those files already hold.
// Each file keeps the first LogCap bytes of its stream (package logcap),
// counting those it already holds.
//
// A daemon restart is not the workload's failure: a container that the
// restart stopped, killed or removed while a handle watched it (the
// handle saw the daemon go away and did not see the container running
// again) ends with Exit.Interrupted, and the engine runs the stage again
// without spending a retry. The executor also names the image a tag
// resolves to (ImageDigest, for run fingerprints) and a container's labels
// (ContainerLabels, for tracing a GPU process to its run).
package docker
