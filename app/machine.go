package app

import (
	"niuma/machine"
)

// machineArbiter is the machine service this user's Niuma places through,
// where one is installed (its socket exists: $NIUMA_MACHINE_SOCKET, else
// /run/niuma/niuma.sock); nil otherwise, and Niuma places alone, as the
// only user. An installed service that does not answer keeps queued
// stages waiting, saying so, rather than letting two users take one GPU.
func machineArbiter() machine.Arbiter {
	sock := machine.Socket()
	if !machine.Installed(sock) {
		return nil
	}
	return machine.NewClient(sock)
}
