// Package slurm runs a stage's attempts as Slurm batch jobs, so that the
// templates that run on a workstation run unchanged on a cluster.
//
// Each attempt is one job, submitted with `sbatch --parsable` from a batch
// script kept in the stage directory (attempt-N.sbatch, with the exact
// sbatch command in its header). The job's name is "niuma-" and the
// attempt's token, its --comment names run, stage, attempt and token: a
// Niuma that died before it learnt the job id finds the job by them
// (Recover with no Ref), and one that Slurm still has is followed, never
// submitted again. Resources come from the stage: --gres=gpu:N for its
// gpus, --mem and --cpus-per-task from the template's runtime memory and
// cpus, --time from its timeout (with --signal=B:TERM@grace, the
// checkpoint warning before the limit); partition, account and QOS from
// the template's runtime: {kind: slurm, …}, else the site's settings.
// --no-requeue: only Niuma's retries run an attempt again.
//
// Nothing of an attempt outlives its job on a cluster without cgroups
// either: the batch script kills every process that carries the
// attempt's token (NIUMA_ATTEMPT_TOKEN) when the command ends, and a
// watcher outside the job's process tree does when the batch shell is
// killed (see batchBody).
//
// The job's stdout and stderr are the attempt's log files in the run
// directory, which must be on a filesystem the nodes share (checked before
// submitting: a network or cluster filesystem, a directory the site lists,
// or a cluster whose nodes are all this machine). The engine follows them
// as it follows a local stage's.
//
// Tracking survives Slurm forgetting: one goroutine looks at every
// followed job at once (squeue, and sacct where the cluster keeps
// accounting), backing off while nothing changes. When accounting is off
// and the controller has forgotten a finished job (MinJobAge), the files
// the job left decide: the shim's exit file with the command's status and
// slurmstepd's lines in the job's stderr (an oom-kill, a time limit). Every
// terminal state becomes an executor.Exit with a reason in words:
// COMPLETED, FAILED (the command's exit code), CANCELLED, TIMEOUT,
// OUT_OF_MEMORY, NODE_FAIL (lost), PREEMPTED and BOOT_FAIL (interrupted: no
// retry spent), DEADLINE. A pending job's reason (squeue %r) is given in
// words through the handle's Waiting.
//
// Containers on the nodes (pyxis, apptainer) are not supported: a stage
// runs in the node's own environment, as a local stage runs on the host,
// and a template's image is not used.
//
// The executor reaches Slurm only through Commands (Slurm's command-line
// tools); it imports nothing of Niuma but engine/executor. Nodes, Jobs and
// FreeGPUs are a small read API for a board of the cluster and for
// counting the GPUs a sweep could use.
package slurm
