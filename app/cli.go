package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"niuma/app/fynelocale"
	"niuma/printable"
	"niuma/storage"
)

// Main runs niuma with the given arguments: no arguments opens the window,
// a subcommand drives the same engine headless. It returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fynelocale.Restore()
	if len(args) == 0 {
		return runWindow(stderr)
	}
	cmd, rest := args[0], args[1:]
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c := &cli{out: stdout, err: stderr}
	var err error
	switch cmd {
	case "run":
		err = c.run(ctx, rest)
	case "ls", "list":
		err = c.ls(ctx, rest)
	case "show":
		err = c.show(ctx, rest)
	case "logs":
		err = c.logs(ctx, rest)
	case "cancel":
		err = c.cancel(ctx, rest)
	case "dismiss":
		err = c.dismiss(ctx, rest)
	case "templates":
		err = c.templates(rest)
	case "report":
		err = c.report(ctx, rest)
	case "gpus":
		err = c.gpus(ctx, rest)
	case "cluster":
		err = c.cluster(ctx, rest)
	case "sim":
		err = c.simCmd(ctx, rest)
	case "import":
		err = c.importCmd(ctx, rest)
	case "tune":
		err = c.tune(ctx, rest)
	case "engine":
		err = c.engineCmd(ctx, rest)
	case "doctor":
		err = c.doctor(ctx, rest)
	case "serve":
		err = c.serve(ctx, rest)
	case "machine":
		err = c.machineCmd(ctx, rest)
	case "window", "gui":
		return runWindow(stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "version", "--version":
		fmt.Fprintln(stdout, "niuma", Version)
		return 0
	default:
		fmt.Fprintf(stderr, "niuma: unknown command %q\n\n%s", printable.Shorten(cmd, 64), usage)
		return 2
	}
	var (
		ex   exitError
		help flagHelp
	)
	switch {
	case errors.As(err, &help):
		fmt.Fprintf(stdout, "Usage of %s:\n", help.fs.Name())
		help.fs.SetOutput(stdout)
		help.fs.PrintDefaults()
		return 0
	case errors.As(err, &ex):
		if ex.msg != "" {
			say(stderr, ex.msg)
		}
		return ex.code
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		msg := oneLine(err)
		if storage.IsDamaged(err) && !strings.Contains(msg, "niuma doctor") {
			msg += ": " + storage.RepairHint
		}
		say(stderr, msg)
		return 1
	}
	return 0
}

// runsCount is "1 run" or "N runs".
func runsCount(n int) string {
	if n == 1 {
		return "1 run"
	}
	return fmt.Sprintf("%d runs", n)
}

// say prints a message for the user: what it repeats of a template, a
// workload or an argument has its control characters escaped, and it is
// cut where a message has no business being longer.
func say(w io.Writer, msg string) {
	fmt.Fprintln(w, "niuma:", printable.Cut(msg, maxMessage))
}

// Lengths past which the CLI refuses an argument, saying how long it is
// instead of repeating it (a run reference, a stage or parameter name; a
// template reference, which may be a path), and cuts a message.
const (
	maxNameArg = 128
	maxPathArg = 4096
	maxMessage = 4000
)

// tooLong refuses, as bad usage, the first of args that is longer than
// max bytes: what (e.g. "run") is N bytes long; at most max.
func tooLong(what string, max int, args ...string) error {
	for _, a := range args {
		if m := printable.TooLong(what, a, max); m != "" {
			return exitError{code: 2, msg: m}
		}
	}
	return nil
}

// Version is the program's version, as in FyneApp.toml.
const Version = "0.1.0"

const usage = `niuma — the digital workhorse: runs ML experiments on this workstation.

Usage:
  niuma                         open the window
  niuma run TEMPLATE [flags]    launch a run of a template (a bundled name, a
                                folder under $NIUMA_HOME/templates, or a .yaml path)
      --set NAME=VALUE          set a parameter (repeatable)
      --executor local|docker|slurm
                                where stages run (default: the template's runtime; a docker
                                template waits for its image unless it says fallback: local)
      --priority N              higher runs first (default 0)
      --seed N                  the run's global seed (default: derived from the run's inputs, recorded)
      --gpus N, --gpu-memory 20GiB, --estimate 2h
                                override what the stages that use GPUs ask for (every stage
                                when none does) and how long they run
      --spot                    may be preempted for higher-priority work: SIGTERM, requeued,
                                resumed with NIUMA_RESUME (the stage directory it kept)
      --share                   may share a GPU with other runs when memory fits
      --allow-duplicate         run even when a run with the same fingerprint already succeeded
      --reuse                   print the ID of that earlier run instead of running (exit 0)
      --wait                    block until the run ends; exit non-zero unless it succeeded
      --sweep NAME=V1,V2,...    sweep a parameter (repeatable): every combination becomes a run;
                                an int may be a range, NAME=A..B or NAME=A..B:STEP
      --random N                N runs with values drawn from the template's ranges (--set fixes some)
      --random-seed N           the seed of --random's draws (default: fresh, printed)
  niuma COMMAND --help          a command's flags
  niuma ls [--json] [-n N]      list runs, newest first
  niuma show RUN [--json]       stages, attempts, exit codes and the last value of each metric
  niuma logs RUN [STAGE] [--follow] [--attempt N] [--raw]
                                a stage's output (all stages when STAGE is omitted),
                                control characters escaped unless --raw
  niuma cancel RUN...           stop runs (SIGTERM, then SIGKILL after a grace period)
  niuma dismiss RUN N           mark anomaly #N of a run (from niuma show) as seen
  niuma templates               list the templates you can run
  niuma report RUN... [--format html|pdf|md|csv|json] [-o PATH] [--page a4|letter]
                                a report of a run, or a comparison of several (--study STUDY: a study's)
  niuma gpus [--watch] [--json] [--simulate-gpus 4xH100-80GB]
                                the GPUs, their load and the runs on them
  niuma cluster [--json] [--partition P] [--user U]
                                the Slurm cluster's nodes (GPUs allocated/total) and your jobs, with why they wait
  niuma sim --trace FILE [--policy herd|bestfit|las|fifo] [--estimates none|predicted|noisy:0.5]
            [--gpus 8x80GiB] [--load 0.8] [--json]
                                replay a Philly or PAI trace through the shepherd
  niuma import tensorboard LOGDIR [--json]
                                bring a TensorBoard logdir's runs (scalars, hparams) into the archive
  niuma tune TEMPLATE [--budget N] [--parallel auto|K] [--space NAME[=LO..HI[:log]]] [--set NAME=VALUE] [--wait]
                                a study: search the parameters for the best objective; losing trials are pruned
  niuma tune --status [STUDY] [--json]   the studies, or one study's trials, pruning evidence and next suggestion
  niuma tune --resume STUDY [--wait]     carry on a study whose niuma was stopped or killed
  niuma tune --stop STUDY                no more trials; the running ones are cancelled
  niuma tune --table FILE [--budget N] [--reps R] [--noisy] [--sampler bayes|random] [--json]
                                the tuner on a tabular benchmark: median regret after each trial
  niuma tune --curves FILE [--pruner median|asha|none] [--trials N] [--reps R] [--json]
                                early stopping replayed on recorded learning curves
  niuma engine [--until-idle]   drive queued and running runs in the foreground
  niuma machine [--json]        the shared machine: teams, shares, who holds and waits for
                                which GPUs, GPU processes by user (needs the machine service)
  niuma serve --system [--socket PATH] [--config FILE] [--db FILE]
                                the machine service (as root): every user's Niuma places its
                                stages through it, with the teams' fair shares (make install-system)
  niuma doctor [--repair] [--json]
                                check the archive (integrity, run folders without runs and runs
                                without folders, backups); --repair restores the newest good backup
                                over a damaged archive, keeping it aside, and registers the run folders
  niuma version

RUN is a run ID, a unique prefix, or a unique end of one. Data lives in $NIUMA_HOME
(default ~/.local/share/niuma).
`

// exitError ends a command with a given code and message.
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// oneLine keeps the first line of an error and says how many more there
// were, so that a user reads a sentence, not a wall.
func oneLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) == 1 {
		return lines[0]
	}
	more := "1 more problem"
	if len(lines) > 2 {
		more = fmt.Sprintf("%d more problems", len(lines)-1)
	}
	return fmt.Sprintf("%s (and %s after this one)", lines[0], more)
}

type cli struct {
	out, err io.Writer
}

func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("niuma "+name, flag.ContinueOnError)
	// The flag package's own printing (the error, then every flag) is
	// replaced by parseInterspersed's errors: one line, and the flags on
	// stdout only when asked for (--help).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// flagHelp is parseInterspersed's answer to -h or --help: Main prints the
// command's flags on stdout and exits 0.
type flagHelp struct{ fs *flag.FlagSet }

func (h flagHelp) Error() string { return "help requested" }

// parseInterspersed parses flags that may come after positional arguments
// (`niuma show ID --json`), which the flag package alone does not allow.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		switch err := fs.Parse(args); {
		case errors.Is(err, flag.ErrHelp):
			return nil, flagHelp{fs}
		case err != nil:
			return nil, exitError{code: 2, msg: fmt.Sprintf("%s: %s; `%s --help` lists its flags", strings.TrimPrefix(fs.Name(), "niuma "), printable.Shorten(err.Error(), 200), fs.Name())}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
