package app

import (
	"context"
	"fmt"
	"time"

	"niuma/machine"
)

// machineArbiter is the machine service this user's Niuma places through
// ($NIUMA_MACHINE_SOCKET, else /run/niuma/niuma.sock) while one is
// installed (machine.Installed: the engine looks again at each pass);
// while none is, Niuma places alone, as the only user. An installed
// service that does not answer keeps queued stages waiting, saying so,
// rather than letting two users take one GPU.
func machineArbiter() *machine.Client { return machine.NewClient(machine.Socket()) }

// machineMode says who places this Niuma's runs, for niuma doctor: it
// alone, or the machine service, and whether that answers now.
func machineMode(ctx context.Context) string {
	a := machineArbiter()
	if !a.Present() {
		return fmt.Sprintf("single user: this Niuma places runs on its own (no machine service at %s)", machine.Socket())
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := a.Status(ctx)
	if err != nil {
		return fmt.Sprintf("shared through the machine service at %s, which does not answer: queued runs wait for it (%v)", machine.Socket(), err)
	}
	who := "you are " + st.User
	if st.Team != "" {
		who += " of team " + st.Team
	}
	return fmt.Sprintf("shared through the machine service at %s (%s; %d stage(s) hold GPUs, CPUs or memory, %d wait)",
		machine.Socket(), who, len(st.Leases), len(st.Queue))
}
