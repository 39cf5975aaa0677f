package slurm

import (
	"regexp"
	"strings"
)

// pendingWords are Slurm's reasons for a pending job (squeue %r, sacct
// Reason) in plain words, phrased as the shepherd phrases its own: what
// holds the job, and what frees it.
var pendingWords = map[string]string{
	"None":                            "submitted; Slurm has not looked at it yet",
	"Resources":                       "the GPUs, CPUs or memory it asks for are in use; it starts when they free up",
	"Priority":                        "jobs of higher priority are ahead of it in the partition",
	"Dependency":                      "waiting for the jobs it depends on",
	"DependencyNeverSatisfied":        "the jobs it depends on ended in a way that means it can never run; cancel it",
	"BeginTime":                       "its start time has not come yet",
	"JobHeldUser":                     "held by its owner (scontrol release JOBID lets it go)",
	"JobHeldAdmin":                    "held by an administrator",
	"ReqNodeNotAvail":                 "the nodes it may run on are down, drained or reserved",
	"NodeDown":                        "a node it needs is down",
	"BadConstraints":                  "no node has the features it asks for (--constraint)",
	"PartitionDown":                   "its partition is down",
	"PartitionInactive":               "its partition is inactive",
	"PartitionNodeLimit":              "it asks for more nodes than its partition allows",
	"PartitionTimeLimit":              "its time limit (the stage's timeout) is longer than its partition allows; lower the timeout or pick another partition",
	"PartitionConfig":                 "its partition's settings do not allow it",
	"Reservation":                     "waiting for its reservation to start",
	"Licenses":                        "the licenses it asks for are in use",
	"Cleaning":                        "its node is cleaning up after an earlier job",
	"Prolog":                          "its node is running the site's prolog",
	"launch failed requeued held":     "its launch failed and Slurm held it",
	"InvalidAccount":                  "its account is not valid on this cluster; fix slurm: account in settings.yaml or the template's runtime: account",
	"InvalidQOS":                      "its QOS is not valid for this user or account; fix the QOS",
	"QOSNotAllowed":                   "its QOS is not allowed in this partition or for this account",
	"AccountNotAllowed":               "its account may not use this partition",
	"FrontEndDown":                    "the cluster's front end is down",
	"NodeNotAvail":                    "the nodes it needs are not available",
	"SchedDefer":                      "the scheduler deferred it; it is looked at again shortly",
	"JobArrayTaskLimit":               "its array's limit on running tasks is reached",
	"MaxRequeue":                      "it was requeued too often",
	"QOSMaxGRESPerUser":               "your QOS allows you no more GPUs at once; it starts when your other jobs release theirs",
	"QOSMaxGRESPerJob":                "it asks for more GPUs than its QOS allows one job; ask for fewer",
	"QOSMaxGRESPerAccount":            "your account's GPUs under this QOS are all in use",
	"QOSGrpGRES":                      "the GPUs allowed to everyone in this QOS together are in use",
	"QOSMaxJobsPerUserLimit":          "your QOS's limit on running jobs per user is reached",
	"QOSMaxSubmitJobPerUserLimit":     "your QOS's limit on queued jobs per user is reached",
	"QOSMaxCpuPerUserLimit":           "your QOS allows you no more CPUs at once",
	"QOSMaxMemoryPerUser":             "your QOS allows you no more memory at once",
	"QOSMaxWallDurationPerJobLimit":   "its time limit (the stage's timeout) is longer than its QOS allows",
	"QOSGrpCpuLimit":                  "the CPUs allowed to everyone in this QOS together are in use",
	"QOSGrpMemLimit":                  "the memory allowed to everyone in this QOS together is in use",
	"QOSGrpNodeLimit":                 "the nodes allowed to everyone in this QOS together are in use",
	"QOSResourceLimit":                "a resource limit of its QOS is reached",
	"QOSJobLimit":                     "its QOS's job limit is reached",
	"AssocGrpGRES":                    "your account's GPUs are all in use",
	"AssocMaxGRESPerJob":              "it asks for more GPUs than your account allows one job; ask for fewer",
	"AssocGrpCpuLimit":                "your account's CPUs are all in use",
	"AssocGrpMemLimit":                "your account's memory is all in use",
	"AssocGrpJobsLimit":               "your account's limit on running jobs is reached",
	"AssocMaxJobsLimit":               "your limit on running jobs is reached",
	"AssocGrpSubmitJobsLimit":         "your account's limit on queued jobs is reached",
	"AssocMaxWallDurationPerJobLimit": "its time limit (the stage's timeout) is longer than your account allows",
	"AssocResourceLimit":              "a resource limit of your account is reached",
	"AssocGrpGRESRunMinutes":          "your account has used up its GPU-minutes for now",
	"AssocGrpCPURunMinutesLimit":      "your account has used up its CPU-minutes for now",
}

// limitRe splits a limit reason that the table lacks into who sets it and
// on what: QOSMaxNodePerUserLimit, AssocGrpBillingMinutes, …
var limitRe = regexp.MustCompile(`^(QOS|Assoc)(Grp|Max|Min)?([A-Za-z]*?)(PerUser|PerAccount|PerJob|PerNode)?(RunMinutes|Minutes|Limit)?$`)

// pendingReason is why a pending job waits, in words, with Slurm's own
// code at the end for looking it up ("… (Slurm: Resources)").
func pendingReason(code string) string {
	code = strings.TrimSpace(code)
	if code == "" {
		code = "None"
	}
	if w, ok := pendingWords[code]; ok {
		if code == "None" {
			return w
		}
		return w + " (Slurm: " + code + ")"
	}
	if m := limitRe.FindStringSubmatch(code); m != nil && m[3] != "" {
		who := "its QOS"
		if m[1] == "Assoc" {
			who = "your account"
		}
		what := strings.ToLower(m[3])
		switch what {
		case "gres":
			what = "GPUs (GRES)"
		case "cpu":
			what = "CPUs"
		case "mem", "memory":
			what = "memory"
		}
		return "a limit of " + who + " on " + what + " holds it (Slurm: " + code + ")"
	}
	return "Slurm holds it: " + code
}
