package engine

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"niuma/shepherd"
)

// ThisMachine is what the shepherd may hand out of the machine the engine
// runs on: its CPUs (those this process may use) and its memory. A figure
// it cannot read is left 0, not limited.
func ThisMachine() shepherd.Host {
	return shepherd.Host{CPUMilli: int64(runtime.NumCPU()) * 1000, MemMiB: memTotalMiB("/proc/meminfo")}
}

// memTotalMiB reads MemTotal from a meminfo file; 0 when it cannot.
func memTotalMiB(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 {
			return 0
		}
		return kb / 1024
	}
	return 0
}
