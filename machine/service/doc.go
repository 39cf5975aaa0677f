// Package service is the machine service (`niuma serve --system`): one
// arbiter of a workstation's GPUs, CPUs and memory for every user's Niuma.
//
// Server listens on a Unix socket open to every user and knows each
// connection's user from its peer credentials (SO_PEERCRED). Arbiter
// holds the machine's state: every user's queue, the leases that placed
// stages hold (under their attempts' tokens), the teams' decayed usage,
// and the admins' cancel orders. Each user's engine asks it at every pass
// (Place): its queue replaces the one it had, everyone's queues are
// scheduled together by the shepherd with the teams' shares (Config), and
// the asker's placed stages get leases, stored in the service's own SQLite
// file (Store) before the answer is sent. A lease its holder no longer
// names, or whose holder has gone quiet, is given up once no process
// carries its token (Procs: the attempts' environments and cgroups, a
// process counting only where it runs as the lease's user); a borrowed
// lease the owner team wants back is marked for reclaim, and its
// holder's engine preempts the attempt. GPUs are had only through the
// queue: a claim takes no lease the service did not give (but for one
// given up while its holder was quiet), and the queue's order (team,
// tier, when a stage first asked) is the service's, not the asker's.
//
// The service never runs anything and never sees a run's parameters, logs
// or metrics: only who holds and waits for what. It imports machine (the
// wire), shepherd, gpumon and the executor contract's token name; no
// engine, no storage of runs.
package service
