// Command workload is the program inside the test image: one small static
// binary that can behave as each kind of stage the docker tests need.
//
//	workload metrics N            print N metric lines, steps 1..N
//	workload exit CODE            exit with CODE
//	workload alloc MIB            allocate and touch MIB MiB, then exit 0
//	workload sleep                block until killed or signalled
//	workload write PATH TEXT      write TEXT to PATH
//	workload cat PATH             print PATH's content
//	workload args ARG...          print each argument on its own line
//	workload hold N READY GO M [CODE]
//	                              print steps 1..N, create READY, wait for
//	                              GO to exist, print steps N+1..M, exit CODE (0)
//	workload forkbomb             fork children that each hold a process
//	                              for ever, and keep forking, as a fork bomb does
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: workload OP ARGS")
	}
	a := os.Args[2:]
	switch os.Args[1] {
	case "metrics":
		metrics(1, num(a, 0))
	case "exit":
		os.Exit(num(a, 0))
	case "alloc":
		var keep [][]byte
		for range num(a, 0) {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
	case "sleep":
		fmt.Println("sleeping")
		for {
			time.Sleep(time.Hour)
		}
	case "write":
		if err := os.WriteFile(a[0], []byte(a[1]), 0o644); err != nil {
			fail(err.Error())
		}
	case "cat":
		b, err := os.ReadFile(a[0])
		if err != nil {
			fail(err.Error())
		}
		os.Stdout.Write(b)
	case "args":
		for _, s := range a {
			fmt.Printf("%s\n", s)
		}
	case "hold":
		metrics(1, num(a, 0))
		if err := os.WriteFile(a[1], nil, 0o644); err != nil {
			fail(err.Error())
		}
		for {
			if _, err := os.Stat(a[2]); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		metrics(num(a, 0)+1, num(a, 3))
		if len(a) > 4 {
			os.Exit(num(a, 4))
		}
	case "forkbomb":
		forkbomb()
	default:
		fail("unknown op " + os.Args[1])
	}
}

func metrics(from, to int) {
	for i := from; i <= to; i++ {
		fmt.Printf("{\"step\": %d, \"loss\": %g}\n", i, 1/float64(i))
	}
}

func num(a []string, i int) int {
	if i >= len(a) {
		fail("missing number")
	}
	n, err := strconv.Atoi(a[i])
	if err != nil {
		fail(err.Error())
	}
	return n
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "workload:", msg)
	os.Exit(100)
}

// forkbomb forks single-threaded children that pause for ever, and keeps
// forking when the kernel refuses, as a fork bomb does. It reports the
// first refusal and how many children it made.
func forkbomb() {
	made, told := 0, false
	for {
		pid, errno := forkPause()
		if errno == 0 {
			made++
			continue
		}
		if !told {
			told = true
			fmt.Fprintf(os.Stderr, "workload: fork after %d children: %v\n", made, errno)
			fmt.Printf("{\"step\": 1, \"children\": %d}\n", made)
		}
		_ = pid
		time.Sleep(10 * time.Millisecond)
	}
}

// forkPause forks; the child, which has only this thread of the Go
// runtime, touches nothing of it and pauses until killed.
//
//go:nosplit
func forkPause() (uintptr, syscall.Errno) {
	pid, _, errno := syscall.RawSyscall(syscall.SYS_FORK, 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	if pid == 0 {
		for {
			syscall.RawSyscall(syscall.SYS_PAUSE, 0, 0, 0)
		}
	}
	return pid, 0
}
