package slurm

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"niuma/engine/executor"
)

func TestParseSacctKeepsTheJobAndItsWorstStep(t *testing.T) {
	// As sacct --parsable2 --noheader -o JobIDRaw,State,ExitCode,Reason,Elapsed,NodeList prints it.
	out := "3|FAILED|1:0|None|00:00:01|vm\n" +
		"3.batch|OUT_OF_MEMORY|0:125||00:00:01|vm\n" +
		"3.extern|COMPLETED|0:0||00:00:01|vm\n" +
		"5|CANCELLED by 1000|0:0|None|1-02:03:04|gpu[01-02]\n" +
		"5.batch|CANCELLED|0:9||00:00:07|gpu01\n" +
		"7|PENDING|0:0|QOSMaxGRESPerUser|00:00:00|None assigned\n" +
		"junk line\n" +
		"x1|COMPLETED|0:0|None|00:00:01|vm\n" +
		"9|TIMEOUT|0:15|None|01:17|vm\n"
	recs := parseSacct([]byte(out))
	require.Len(t, recs, 4)
	require.Equal(t, &record{ID: "3", State: "FAILED", Code: 1, Reason: "None", Nodes: "vm", Elapsed: time.Second, StepState: "OUT_OF_MEMORY"}, recs["3"])
	require.Equal(t, "CANCELLED", recs["5"].State)
	require.Equal(t, "1000", recs["5"].By)
	require.Equal(t, 26*time.Hour+3*time.Minute+4*time.Second, recs["5"].Elapsed)
	require.Equal(t, "CANCELLED", recs["5"].StepState)
	require.Equal(t, "QOSMaxGRESPerUser", recs["7"].Reason)
	require.Equal(t, 15, recs["9"].Signal)
	require.Equal(t, 77*time.Second, recs["9"].Elapsed)
}

func TestParseSqueueKeepsACommentWithBars(t *testing.T) {
	out := "12|PENDING|Resources||0:00|niuma-abc|niuma run=r stage=s attempt=1 token=abc\n" +
		"13|RUNNING|None|vm|1:02:03|other|a|b|c\n" +
		"14|COMPLETING+|None|vm|5:00|x|\n" +
		"1_2|RUNNING|None|vm|0:01|array|\n"
	recs := parseSqueue([]byte(out))
	require.Len(t, recs, 3)
	require.Equal(t, "abc", tokenOf(recs["12"].Comment))
	require.Equal(t, "a|b|c", recs["13"].Comment)
	require.Equal(t, time.Hour+2*time.Minute+3*time.Second, recs["13"].Elapsed)
	require.Equal(t, "COMPLETING", recs["14"].State)
	require.Equal(t, -1, recs["12"].Code, "squeue gives no exit code")
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0:05": 5 * time.Second, "00:01:17": 77 * time.Second, "1-00:00:00": 24 * time.Hour,
		"2-03": 51 * time.Hour, "45": 45 * time.Second, "10:00": 10 * time.Minute,
	} {
		got, ok := parseDuration(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "INVALID", "UNLIMITED", "a:b", "1:2:3:4", "-5", "1-", "9999999999:00"} {
		_, ok := parseDuration(bad)
		require.False(t, ok, bad)
	}
}

func TestTimeLimitsAreWholeMinutesRoundedUp(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Second: "1", time.Minute: "1", 61 * time.Second: "2", 2 * time.Hour: "120"} {
		require.Equal(t, want, formatTimeLimit(d), d.String())
	}
}

func TestScanLogReadsOnlySlurmstepdsLines(t *testing.T) {
	for _, tt := range []struct {
		name, log string
		want      logSigns
	}{
		{"a cgroup oom-kill", "step 1\nslurmstepd-vm: error: Detected 1 oom-kill event(s) in StepId=3.batch. Some of your processes may have been killed by the cgroup out-of-memory handler.\n",
			logSigns{OOM: true, First: "Detected 1 oom-kill event(s) in StepId=3.batch. Some of your processes may have been killed by the cgroup out-of-memory handler."}},
		{"older Slurm's oom_kill", "slurmstepd: error: Detected 1 oom_kill event in step 5.batch cgroup.\n", logSigns{OOM: true, First: "Detected 1 oom_kill event in step 5.batch cgroup."}},
		{"memory polling", "slurmstepd-vm: error: StepId=1000000.batch exceeded memory limit (157040640 > 67108864), being killed\nslurmstepd-vm: error: Exceeded job memory limit\nslurmstepd-vm: error: *** JOB 1000000 ON vm CANCELLED AT 2026-12-01T20:28:09 ***\n",
			logSigns{OOM: true, Cancelled: true, First: "StepId=1000000.batch exceeded memory limit (157040640 > 67108864), being killed"}},
		{"a time limit", "slurmstepd: error: *** JOB 8 ON gpu01 CANCELLED AT 2026-12-01T20:31:12 DUE TO TIME LIMIT ***\n", logSigns{TimeLimit: true, First: "*** JOB 8 ON gpu01 CANCELLED AT 2026-12-01T20:31:12 DUE TO TIME LIMIT ***"}},
		{"preemption", "slurmstepd: error: *** JOB 8 ON gpu01 CANCELLED AT 2026-12-01T20:31:12 DUE TO PREEMPTION ***\n", logSigns{Preempted: true, First: "*** JOB 8 ON gpu01 CANCELLED AT 2026-12-01T20:31:12 DUE TO PREEMPTION ***"}},
		{"a node failure", "slurmstepd: error: *** STEP 8.0 ON gpu01 CANCELLED AT 2026-12-01T20:31:12 DUE TO NODE FAILURE ***\r\n", logSigns{NodeFail: true, First: "*** STEP 8.0 ON gpu01 CANCELLED AT 2026-12-01T20:31:12 DUE TO NODE FAILURE ***"}},
		{"the workload's own words do not count", "oom_kill\nExceeded job memory limit\n*** JOB 1 ON x CANCELLED AT y DUE TO TIME LIMIT ***\nmy slurmstepd: error: oom-kill\n", logSigns{}},
		{"an info line is no error", "slurmstepd: info: Setting TMPDIR to /tmp\n", logSigns{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, scanLog(strings.NewReader(tt.log)))
		})
	}
}

func TestExitOfEveryTerminalState(t *testing.T) {
	started := &startMark{Job: "1", Node: "gpu01", At: time.Unix(1000, 0)}
	lim := limits{MemoryMiB: 64, TimeLimit: time.Minute}
	for _, tt := range []struct {
		name string
		r    *record
		ev   evidence
		want executor.Exit
	}{
		{"completed", &record{State: "COMPLETED", Code: 0}, evidence{started: started, exit: &exitMark{Code: 0}}, executor.Exit{Code: 0}},
		{"failed with the command's code", &record{State: "FAILED", Code: 3, Nodes: "gpu01"}, evidence{started: started, exit: &exitMark{Code: 3}}, executor.Exit{Code: 3}},
		{"failed, the code from accounting alone", &record{State: "FAILED", Code: 2, Nodes: "gpu01"}, evidence{started: started}, executor.Exit{Code: 2}},
		{"a command killed by SIGTERM", &record{State: "FAILED", Code: 143}, evidence{started: started, exit: &exitMark{Code: 143}}, executor.Exit{Code: 143, Reason: "exited with code 143 (terminated)"}},
		{"the batch shell killed after the grace", &record{State: "FAILED", Code: 0, Signal: 9}, evidence{started: started}, executor.Exit{Code: -1, Signal: "killed"}},
		{"failed before it started", &record{State: "FAILED", Code: 1, Nodes: "gpu01"}, evidence{}, executor.Exit{Code: -1, Reason: "the job ended on gpu01 before the stage started (is the run directory visible on the node? Slurm: FAILED, exit code 1:0)"}},
		{"failed before it started, slurmstepd says why", &record{State: "FAILED", Code: 1, Nodes: "gpu01"}, evidence{log: logSigns{First: "Could not open stdout file /x/y: No such file or directory"}},
			executor.Exit{Code: -1, Reason: "the job ended on gpu01 before the stage started: Could not open stdout file /x/y: No such file or directory"}},
		{"out of memory", &record{State: "OUT_OF_MEMORY", Nodes: "gpu01"}, evidence{started: started, exit: &exitMark{Code: 137}},
			executor.Exit{Code: -1, OOMKilled: true, Reason: "killed: out of memory on gpu01: it used more than its 64 MiB (--mem); raise runtime: memory"}},
		{"failed, but a step ran out of memory", &record{State: "FAILED", Code: 1, StepState: "OUT_OF_MEMORY"}, evidence{started: started},
			executor.Exit{Code: -1, OOMKilled: true, Reason: "killed: out of memory: it used more than its 64 MiB (--mem); raise runtime: memory"}},
		{"failed, and only the log says oom", &record{State: "FAILED", Signal: 9, Nodes: "vm"}, evidence{started: started, log: logSigns{OOM: true}},
			executor.Exit{Code: -1, OOMKilled: true, Reason: "killed: out of memory on vm: it used more than its 64 MiB (--mem); raise runtime: memory"}},
		{"timeout", &record{State: "TIMEOUT"}, evidence{started: started}, executor.Exit{Code: -1, Reason: "timeout: Slurm stopped it at its time limit of 1m0s (the stage's timeout)"}},
		{"cancelled by someone", &record{State: "CANCELLED", By: "1000", Nodes: "gpu01"}, evidence{started: started}, executor.Exit{Code: -1, Reason: "cancelled in Slurm by uid 1000 on gpu01"}},
		{"cancelled while pending", &record{State: "CANCELLED", By: "0", Nodes: "None assigned"}, evidence{}, executor.Exit{Code: -1, Reason: "cancelled in Slurm by uid 0 before it started"}},
		{"node failure is lost", &record{State: "NODE_FAIL", Nodes: "gpu07"}, evidence{started: started}, executor.Exit{Code: -1, Lost: true, Reason: "lost: its node gpu07 failed under it (Slurm: NODE_FAIL)"}},
		{"preempted: runs again, no retry spent", &record{State: "PREEMPTED", Nodes: "gpu07"}, evidence{started: started}, executor.Exit{Code: -1, Interrupted: true, Reason: "interrupted: Slurm preempted it on gpu07 for another job (PREEMPTED)"}},
		{"boot failure", &record{State: "BOOT_FAIL", Nodes: "gpu07"}, evidence{}, executor.Exit{Code: -1, Interrupted: true, Reason: "interrupted: its node gpu07 failed to boot (Slurm: BOOT_FAIL)"}},
		{"deadline", &record{State: "DEADLINE"}, evidence{}, executor.Exit{Code: -1, Reason: "cancelled by Slurm: it could not end before its deadline (DEADLINE)"}},
		{"an unknown state", &record{State: "REVOKED"}, evidence{}, executor.Exit{Code: -1, Reason: "ended in Slurm state REVOKED"}},

		// Slurm has forgotten the job and keeps no accounting.
		{"forgotten: the exit file", nil, evidence{started: started, exit: &exitMark{Code: 5, At: time.Unix(1010, 0)}}, executor.Exit{Code: 5}},
		{"forgotten: success", nil, evidence{started: started, exit: &exitMark{Code: 0}, log: logSigns{OOM: true}}, executor.Exit{Code: 0}},
		{"forgotten: oom in the log, status 137", nil, evidence{started: started, exit: &exitMark{Code: 137}, log: logSigns{OOM: true}},
			executor.Exit{Code: -1, OOMKilled: true, Reason: "killed: out of memory on gpu01: it used more than its 64 MiB (--mem); raise runtime: memory"}},
		{"forgotten: oom in the log, no exit file", nil, evidence{started: started, log: logSigns{OOM: true, Cancelled: true}},
			executor.Exit{Code: -1, OOMKilled: true, Reason: "killed: out of memory on gpu01: it used more than its 64 MiB (--mem); raise runtime: memory"}},
		{"forgotten: ran to its time limit", nil, evidence{started: started, exit: &exitMark{Code: 143, At: time.Unix(1060, 0)}},
			executor.Exit{Code: -1, Reason: "timeout: Slurm stopped it at its time limit of 1m0s (the stage's timeout)"}},
		{"forgotten: stopped earlier is no timeout", nil, evidence{started: started, exit: &exitMark{Code: 143, At: time.Unix(1030, 0)}}, executor.Exit{Code: 143, Reason: "exited with code 143 (terminated)"}},
		{"forgotten: the log says time limit", nil, evidence{started: started, log: logSigns{TimeLimit: true}}, executor.Exit{Code: -1, Reason: "timeout: Slurm stopped it at its time limit of 1m0s (the stage's timeout)"}},
		{"forgotten: cancelled", nil, evidence{started: started, log: logSigns{Cancelled: true}}, executor.Exit{Code: -1, Signal: "killed", Reason: "cancelled in Slurm on gpu01"}},
		{"forgotten: preempted", nil, evidence{started: started, log: logSigns{Preempted: true}}, executor.Exit{Code: -1, Interrupted: true, Reason: "interrupted: Slurm preempted it on gpu01 for another job"}},
		{"forgotten: node failure", nil, evidence{started: started, log: logSigns{NodeFail: true}}, executor.Exit{Code: -1, Lost: true, Reason: "lost: its node gpu01 failed under it"}},
		{"forgotten: nothing but the start", nil, evidence{started: started}, executor.Exit{Code: -1, Lost: true,
			Reason: "the job ended on gpu01 without an exit status, and Slurm has forgotten it (no accounting): killed by a signal or its node failed?"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, exitOf(tt.r, tt.ev, lim))
		})
	}
	require.Equal(t, "killed: out of memory: it used more than the memory Slurm gave it (the partition's default)",
		exitOf(&record{State: "OUT_OF_MEMORY"}, evidence{}, limits{}).Reason)
}

func TestPendingReasonsInWords(t *testing.T) {
	for code, want := range map[string]string{
		"Resources":              "the GPUs, CPUs or memory it asks for are in use; it starts when they free up (Slurm: Resources)",
		"Priority":               "jobs of higher priority are ahead of it in the partition (Slurm: Priority)",
		"QOSMaxGRESPerUser":      "your QOS allows you no more GPUs at once; it starts when your other jobs release theirs (Slurm: QOSMaxGRESPerUser)",
		"":                       "submitted; Slurm has not looked at it yet",
		"None":                   "submitted; Slurm has not looked at it yet",
		"QOSMaxNodePerUserLimit": "a limit of its QOS on node holds it (Slurm: QOSMaxNodePerUserLimit)",
		"AssocGrpGRESMinutes":    "a limit of your account on GPUs (GRES) holds it (Slurm: AssocGrpGRESMinutes)",
		"AssocGrpCpuLimit":       "your account's CPUs are all in use (Slurm: AssocGrpCpuLimit)",
		"SomethingNew":           "Slurm holds it: SomethingNew",
	} {
		require.Equal(t, want, pendingReason(code), code)
	}
}

func TestParseSinfoCountsGPUsPerNode(t *testing.T) {
	out := "vm|mixed|1/3/0/4|4096|100|gpu:4|gpu:2|debug*|none\n" +
		"g1|allocated|64/0/0/64|512000|512000|gpu:a100:4(S:0-1),gpu:v100:4|gpu:a100:4(IDX:0-3),gpu:v100:1(IDX:5)|gpu|none\n" +
		"g1|allocated|64/0/0/64|512000|512000|gpu:a100:4(S:0-1),gpu:v100:4|gpu:a100:4(IDX:0-3),gpu:v100:1(IDX:5)|long|none\n" +
		"g2|drained|0/0/64/64|512000|0|gpu:8|gpu:0(IDX:N/A)|gpu|bad fan | replaced soon\n" +
		"c1|idle|0/8/0/8|16000|0|(null)|(null)|debug*|none\n"
	nodes := parseSinfo([]byte(out))
	require.Len(t, nodes, 4)
	require.Equal(t, Node{Name: "vm", State: "mixed", Partitions: []string{"debug"}, Default: true, CPUs: 4, CPUsAlloc: 1, MemoryMiB: 4096, MemAlloc: 100, GPUs: 4, GPUsAlloc: 2}, nodes[0])
	require.Equal(t, []string{"gpu", "long"}, nodes[1].Partitions)
	require.Equal(t, 8, nodes[1].GPUs)
	require.Equal(t, 5, nodes[1].GPUsAlloc)
	require.Equal(t, "bad fan | replaced soon", nodes[2].Reason)
	require.False(t, nodes[2].Usable())
	require.Equal(t, 0, nodes[3].GPUs)
	// gpu: g1 has 3 free, g2 is drained; the default partition: vm's 2.
	require.Equal(t, 3, FreeGPUs(nodes, "gpu"))
	require.Equal(t, 2, FreeGPUs(nodes, ""))
	require.Equal(t, 3, gresCount("gpu:3(IDX:0-1,3)", "gpu"))
	require.Equal(t, 2, gresCount("gres:gpu:2", "gpu"))
	require.Equal(t, 2, gresCount("gres/gpu:2,gres/shard:8", "gpu"))
}

func TestParseJobsNamesNiumasOwn(t *testing.T) {
	out := "41|niuma-tok|ana|PENDING|gpu||gres:gpu:2|QOSMaxGRESPerUser|niuma run=r1 stage=train attempt=2 token=tok\n" +
		"40|mine|ana|RUNNING|gpu|g1|N/A|None|run=fake stage=x\n"
	jobs := parseJobs([]byte(out))
	require.Len(t, jobs, 2)
	require.Equal(t, QueuedJob{ID: "40", Name: "mine", User: "ana", State: "RUNNING", Partition: "gpu", Nodes: "g1", Reason: "None"}, jobs[0])
	require.Equal(t, "r1", jobs[1].RunID)
	require.Equal(t, "train", jobs[1].Stage)
	require.Equal(t, 2, jobs[1].Attempt)
	require.Equal(t, 2, jobs[1].GPUs)
	require.Contains(t, jobs[1].Waiting, "your QOS allows you no more GPUs")
}

// The parsers read what Slurm prints, but also job names, comments and
// admins' reasons, and the log scanner reads what workloads write.
func FuzzParseSlurmOutput(f *testing.F) {
	f.Add("3|FAILED|1:0|None|00:00:01|vm\n3.batch|OUT_OF_MEMORY|0:125||00:00:01|vm\n")
	f.Add("12|PENDING|Resources||0:00|niuma-abc|niuma run=r stage=s attempt=1 token=abc\n")
	f.Add("g1|allocated|64/0/0/64|512000|512000|gpu:a100:4(S:0-1),gpu:v100:4|gpu:a100:4(IDX:0-3)|gpu|none\n")
	f.Add("slurmstepd-vm: error: *** JOB 8 ON vm CANCELLED AT 2026 DUE TO TIME LIMIT ***\n")
	f.Fuzz(func(t *testing.T, s string) {
		for id, r := range parseSacct([]byte(s)) {
			if !jobID(id) || r.ID != id || r.State == "" {
				t.Fatalf("sacct record %q: %+v", id, r)
			}
		}
		for id, r := range parseSqueue([]byte(s)) {
			if !jobID(id) || r.ID != id || r.State == "" {
				t.Fatalf("squeue record %q: %+v", id, r)
			}
		}
		for _, n := range parseSinfo([]byte(s)) {
			if n.Name == "" || n.GPUs < 0 || n.GPUsAlloc < 0 {
				t.Fatalf("node %+v", n)
			}
		}
		for _, j := range parseJobs([]byte(s)) {
			if !jobID(j.ID) {
				t.Fatalf("job %+v", j)
			}
		}
		for _, j := range parseSweep([]byte(s)) {
			if !jobID(j.ID) {
				t.Fatalf("sweep job %+v", j)
			}
		}
		_ = commentField(s, "home")
		_ = scanLog(strings.NewReader(s))
		_ = pendingReason(s)
		_, _ = parseDuration(s)
		_ = tokenOf(s)
	})
}
