package engine

import (
	"context"
	"errors"

	"niuma/machine"
)

// ErrNoMachine is MachineStatus's answer where no machine service is
// installed: this Niuma places runs on its own, as the only user.
var ErrNoMachine = errors.New("no machine service: this Niuma places runs on its own, as the only user (niuma serve --system shares the machine among users)")

// MachineStatus is the whole machine as the machine service shows it to
// any user: every user's leases and queued stages by run name and GPUs,
// the teams' shares and what they lend, every GPU process by user.
func (e *Engine) MachineStatus(ctx context.Context) (machine.Status, error) {
	if e.opts.Machine == nil {
		return machine.Status{}, ErrNoMachine
	}
	return e.opts.Machine.Status(ctx)
}
