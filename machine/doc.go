// Package machine is the arbiter of a workstation shared by several users:
// the wire between each user's Niuma and the machine service (`niuma serve
// --system`), which owns placement for the whole machine.
//
// Each user's engine keeps one connection to the service's Unix socket;
// the service knows the user from the socket's peer credentials
// (SO_PEERCRED), never from what the message says. The engine sends its
// ready stages (Ask.Queue) and the attempts it follows (Ask.Running) at
// every pass; the service schedules everyone's queue together, with the
// teams' shares, and answers with a Decision per entry. A placed entry
// holds a lease under the token its attempt will carry, stored in the
// service's own SQLite file before the answer is sent. The engine claims
// the lease again just before it launches the attempt (Claim) and releases
// it when the attempt has ended (Release); a lease whose holder and
// processes are gone is reclaimed by the service.
//
// Runs execute as their user and stay in that user's archive: the service
// stores only leases, queue entries and usage, and shows other users only
// who holds what (user, run name, GPUs), never parameters, logs or metrics.
//
// This package holds the wire types, the Arbiter interface the engine
// uses, and the client; machine/service is the service.
package machine
