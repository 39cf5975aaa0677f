package sentinel

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Failure is what is known about an attempt that failed: how it ended, the
// last lines it wrote, and where and how it ran.
type Failure struct {
	ExitCode  *int   // nil when it has none (killed by a signal, lost)
	Signal    string // the signal that ended it, in words ("killed"), if any
	OOMKilled bool   // the kernel's OOM killer ended it (a container's memory limit)
	// Output is the end of its stderr (and, after it, of its stdout).
	Output string
	// Command is the argv it ran; RunDir its working directory.
	Command []string
	RunDir  string
	// Container: it ran in a container, whose /dev/shm (0: Docker's
	// default, 64 MiB) and memory limit (0: none) are these.
	Container  bool
	ShmSizeMiB int64
	MemoryMiB  int64
	// StageMemoryMiB is the stage's own memory: (0: none), which a host
	// process's cgroup enforces as its limit.
	StageMemoryMiB int64
	// Interpreter is what the command's program resolved to when the run
	// was submitted (its provenance), Resolved what it resolved to when it
	// ran; "" when unknown.
	Interpreter, Resolved string
}

// Cause names a recognised reason for a failure. CUDAOOM doubles as the
// Kind a template's sentinel section answers (cuda_oom: {do: retry, ...}).
type Cause string

// Causes, in the order they are looked for.
const (
	CauseShm              Cause = "shm"
	CauseCUDAOOM          Cause = Cause(CUDAOOM)
	CauseHostOOM          Cause = "host_oom"
	CauseWrongInterpreter Cause = "wrong_interpreter"
	CauseMissingModule    Cause = "missing_module"
	CauseFileNotFound     Cause = "file_not_found"
	CauseKilled           Cause = "killed"
)

// Hint is a recognised cause of a failure and what to do about it.
type Hint struct {
	Cause   Cause
	Summary string // what happened, in a sentence
	Fix     string // what to change
	Line    string // the output line that gave it away ("" when none)
}

var (
	shmRe = regexp.MustCompile(`(?i)insufficient shared memory \(shm\)|out of shared memory|` +
		`unable to (?:write to|open shared memory object|allocate shared memory)|/dev/shm.*No space left on device|No space left on device.*/dev/shm`)
	cudaOOMRe = regexp.MustCompile(`CUDA out of memory|torch\.cuda\.OutOfMemoryError|CUDA error: out of memory|` +
		`CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_(?:NOT_SUPPORTED|ALLOC_FAILED).*memory|` +
		`ResourceExhaustedError.*OOM|OOM when allocating tensor|RESOURCE_EXHAUSTED: Out of memory|cudaErrorMemoryAllocation`)
	hostOOMRe     = regexp.MustCompile(`(?i)\bMemoryError\b|Cannot allocate memory|std::bad_alloc|oom-kill|Out of memory: Killed process`)
	moduleRe      = regexp.MustCompile(`(?:ModuleNotFoundError|ImportError): No module named '?([A-Za-z0-9_.]+)'?`)
	notFoundRe    = regexp.MustCompile(`(?:FileNotFoundError: \[Errno 2\] No such file or directory|can't open file|No such file or directory): '([^']+)'`)
	canNotOpenRe  = regexp.MustCompile(`can't open file '([^']+)': \[Errno 2\]`)
	execMissingRe = regexp.MustCompile(`exec: "?([^":]+)"?: (?:executable file not found|no such file)`)
)

// Diagnose recognises the cause of a failure from how it ended and the
// lines it wrote; ok is false when nothing is recognised (the exit code
// is then all there is to say).
func Diagnose(f Failure) (h Hint, ok bool) {
	lines := strings.Split(strings.TrimRight(f.Output, "\n"), "\n")
	find := func(re *regexp.Regexp) (string, []string) {
		for i := len(lines) - 1; i >= 0; i-- { // the last mention is the cause
			if m := re.FindStringSubmatch(lines[i]); m != nil {
				return strings.TrimSpace(lines[i]), m
			}
		}
		return "", nil
	}
	if line, _ := find(shmRe); line != "" {
		fix := "give the stage more shared memory: on the host, enlarge /dev/shm (mount -o remount,size=8G /dev/shm); in a container, raise runtime: {shm_size: 8GiB}; or use fewer DataLoader workers (num_workers)"
		if f.Container {
			now := "1 GiB, Niuma's default"
			if f.ShmSizeMiB > 0 {
				now = fmt.Sprintf("%d MiB", f.ShmSizeMiB)
			}
			fix = fmt.Sprintf("raise the container's shared memory in the template: runtime: {shm_size: 8GiB} (now %s); or use fewer DataLoader workers (num_workers)", now)
		}
		return Hint{Cause: CauseShm, Line: line,
			Summary: "the DataLoader's worker processes ran out of shared memory (/dev/shm)", Fix: fix}, true
	}
	if line, _ := find(cudaOOMRe); line != "" {
		return Hint{Cause: CauseCUDAOOM, Line: line,
			Summary: "the GPU ran out of memory",
			Fix: "lower the batch size (or use gradient accumulation), use mixed precision (torch.autocast) or gradient checkpointing, or ask for a GPU with more memory (gpu_memory); " +
				"to let Niuma retry with half the batch automatically, add to the template: sentinel: {cuda_oom: {do: retry, set: {batch_size: \"/2\"}}}"}, true
	}
	if f.OOMKilled {
		fix := "lower the stage's memory use (batch size, DataLoader workers and prefetch, data held in memory)"
		switch {
		case f.Container && f.MemoryMiB > 0:
			fix = fmt.Sprintf("raise the container's limit, runtime: {memory: ...} (now %d MiB), or %s", f.MemoryMiB, fix)
		case !f.Container && f.StageMemoryMiB > 0:
			fix = fmt.Sprintf("raise the stage's memory: in the template (now %d MiB), which is its limit, or %s", f.StageMemoryMiB, fix)
		}
		return Hint{Cause: CauseHostOOM, Summary: "the kernel's out-of-memory killer ended it: it used more memory than the machine (or its container) allows", Fix: fix}, true
	}
	if line, _ := find(hostOOMRe); line != "" {
		return Hint{Cause: CauseHostOOM, Line: line, Summary: "it ran out of host memory (RAM)",
			Fix: "lower the stage's memory use (batch size, DataLoader workers and prefetch, data held in memory), or run fewer stages at once"}, true
	}
	if line, m := find(moduleRe); line != "" {
		mod := m[1]
		if f.Interpreter != "" && f.Resolved != "" && f.Interpreter != f.Resolved {
			return Hint{Cause: CauseWrongInterpreter, Line: line,
				Summary: fmt.Sprintf("the stage ran %s, not %s, the interpreter recorded when the run was submitted (the process that drives runs has another PATH), and it has no module %s", f.Resolved, f.Interpreter, mod),
				Fix:     fmt.Sprintf("give the interpreter's full path in the template's command, e.g. command: [%s, ...]", f.Interpreter)}, true
		}
		prog := "the stage's interpreter"
		if len(f.Command) > 0 {
			prog = f.Command[0]
			if f.Resolved != "" {
				prog = f.Resolved
			}
		}
		return Hint{Cause: CauseMissingModule, Line: line,
			Summary: fmt.Sprintf("Python module %s is not installed for %s", mod, prog),
			Fix: fmt.Sprintf("install it for that interpreter (%s -m pip install %s, or in the image), or give the full path of the interpreter that has it in the command",
				prog, strings.Split(mod, ".")[0])}, true
	}
	if line, m := find(canNotOpenRe); line != "" {
		return fileNotFound(f, line, m[1]), true
	}
	if line, m := find(notFoundRe); line != "" {
		return fileNotFound(f, line, m[1]), true
	}
	if line, m := find(execMissingRe); line != "" {
		return Hint{Cause: CauseFileNotFound, Line: line, Summary: fmt.Sprintf("the program %s was not found", m[1]),
			Fix: "give its full path in the command, or install it where the stage runs"}, true
	}
	if f.Signal == "killed" || (f.ExitCode != nil && *f.ExitCode == 137) {
		return Hint{Cause: CauseKilled, Summary: "it was killed (SIGKILL); unless someone killed it, that is usually the kernel's out-of-memory killer",
			Fix: "look for \"Out of memory: Killed process\" in the kernel log (journalctl -k or dmesg) and lower the stage's memory use (batch size, DataLoader workers)"}, true
	}
	return Hint{}, false
}

// fileNotFound explains a missing file: a relative path is looked for in
// the run directory, the stage's working directory, not in the template's.
func fileNotFound(f Failure, line, name string) Hint {
	h := Hint{Cause: CauseFileNotFound, Line: line, Summary: fmt.Sprintf("file %s was not found", name)}
	if !path.IsAbs(name) {
		where := "the run directory"
		if f.RunDir != "" {
			where += " (" + f.RunDir + ")"
		}
		h.Summary = fmt.Sprintf("file %s was not found: a relative path is looked for in %s, where stages run, not in the template's folder", name, where)
		h.Fix = fmt.Sprintf("write the path from the template's folder as ${code}/%s (or ${data}/... for the template's data directory)", name)
		return h
	}
	h.Fix = "check the path, and that an earlier stage wrote the file (stages write under ${run_dir}/<stage>/)"
	return h
}
