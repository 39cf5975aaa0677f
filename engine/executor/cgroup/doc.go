// Package cgroup gives each stage attempt a control group of its own, under
// a subtree of Niuma's, on either layout a Linux workstation has: the
// unified cgroup v2 tree, or the v1 hierarchies (memory, cpu, cpuacct,
// pids, freezer mounted separately). A process cannot leave its cgroup by
// clearing its environment, forking twice or calling setsid, so the group
// is what says which processes are an attempt's: Kill ends all of them
// (v2 cgroup.kill; v1: freeze, SIGKILL each, thaw), Limits are enforced by
// the kernel (memory.max / memory.limit_in_bytes, cpu.max /
// cpu.cfs_quota_us), Stats reads the accounting (memory, its peak, CPU
// time, OOM kills) and Freeze pauses the group.
//
// A process joins a group by writing 0 to each of Group.JoinFiles: the
// kernel moves the writer, so a shell joins itself before it runs the
// command, and everything the command starts is born inside.
//
// cgroup knows nothing of runs, stages or the engine; it imports no Niuma
// package.
package cgroup
