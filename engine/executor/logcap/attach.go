package logcap

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"niuma/engine/executor"
)

// WrapperName is the wrapper shell's $0: its fourth word on its command
// line, and that of every subshell it forks, the cappers among them until
// they exec perl (which then carries no token). It tells a capper from
// what a command left behind.
const WrapperName = "niuma-logs"

// capScript runs "$@" (the attempt's shim) with its stdout and stderr going
// through a capper, into the log files. The file descriptors it gets (see
// Attach):
//
//	1, 2  the write ends of the stdout and stderr pipes: the shim's output
//	3, 4  their read ends: the capper's input
//	5, 6  the stdout and stderr log files
//	7     the write end of a pipe only the capper holds: Niuma reads its end
//	      to learn that the capper is done
//
// The capper is one perl process (perlCapper; perl is on every Linux
// workstation, and is the one tool there that copies two streams as they
// come, byte-exact, with no stdio buffer holding lines back). Without
// perl, a shell capper per stream does the same with head and wc, but
// head's stdio buffer then holds back up to a block of output until more
// comes or the stream ends.
//
// The capper ignores SIGTERM, SIGINT and SIGHUP, which Stop sends the
// whole process group: it must live on to take what the command writes
// while it checkpoints. It is started while the wrapper ignores the
// signals (an ignored signal stays ignored in a subshell and across exec,
// so no signal can come between the fork and the trap); the shim is
// started after the wrapper catches them instead, so that it and the
// command get the signals' defaults (a caught signal is reset by exec).
// Descriptors are set with exec in the capper's subshell: a shell may keep
// copies of the descriptors a redirection of a command replaces (to
// restore them after it), and a copy of a pipe's write end would keep the
// capper from ever seeing the end of the stream.
//
// A shim that is a shell script (sh -c SCRIPT NAME ARGS...) is run in a
// subshell of the wrapper, its arguments the wrapper's, rather than by a
// second shell: one exec less for every stage.
//
// The cappers do not carry the attempt's token (executor.TokenEnv): what
// carries it once the command has ended is something the command left
// behind, and is killed; the cappers go on until they have copied the rest.
//
// The wrapper then waits for the shim only, in the foreground (see the
// shim on why), and exits with its status. A process the command left
// behind may hold the pipes open: the capper then goes on, but the attempt
// is not held up by it.
const capScript = `cap=$1 ob=$2 oa=$3 eb=$4 ea=$5 oc=$6 ec=$7 capper=$8 script=$9; shift 9
capped() {
	head -c "$cap"
	n=$(wc -c)
	[ "$n" -eq 0 ] || printf '\n%s%s%s\n' "$1" "$n" "$2"
}
trap '' TERM INT HUP
if command -v perl >/dev/null 2>&1; then
	(unset ` + executor.TokenEnv + `; exec >/dev/null 2>&1 8>&-; exec perl -e "$capper" "$cap" "$ob" "$oa" "$eb" "$ea" "$oc" "$ec") &
else
	(unset ` + executor.TokenEnv + `; exec <&3 >&5 2>/dev/null 3<&- 4<&- 5>&- 6>&- 8>&-; capped "$ob" "$oa") &
	(unset ` + executor.TokenEnv + `; exec <&4 >&6 2>/dev/null 3<&- 4<&- 5>&- 6>&- 8>&-; capped "$eb" "$ea") &
fi
trap : TERM INT HUP
if [ -n "$script" ]; then
	(exec 3<&- 4<&- 5>&- 6>&- 7>&-; eval "$script")
else
	(exec 3<&- 4<&- 5>&- 6>&- 7>&-; exec "$@")
fi
exit "$?"
`

// perlCapper copies fds 3 and 4 to 5 and 6 as data comes, keeping the first
// cap bytes of each; at the cut it writes the cut notice, at the end of a
// stream that was cut the count of dropped bytes. A write the disk has no
// room for (ENOSPC, EDQUOT) is kept and tried again every 250 ms, and the
// stream is not read meanwhile: its pipe fills, and the command blocks on
// its next write to it until the disk has room, so no output is lost to a
// full disk (at most one read, 64 KiB, waits in the capper).
const perlCapper = `my ($cap, @m) = @ARGV;
$SIG{$_} = 'IGNORE' for qw(TERM INT HUP);
my @s;
for my $i (0, 1) {
	open(my $in, '<&=', 3 + $i) or exit 1;
	open(my $out, '>>&=', 5 + $i) or exit 1;
	push @s, {in => $in, fd => 3 + $i, out => $out, kept => 0, dropped => 0, pend => '',
		before => $m[2*$i], after => $m[2*$i+1], cut => $m[4+$i]};
}
sub flush { my ($s) = @_;
	while (length $s->{pend}) {
		my $w = syswrite($s->{out}, $s->{pend});
		if (!defined $w) {
			next if $!{EINTR};
			return if $!{ENOSPC} || $!{EDQUOT} || $!{EAGAIN};
			$s->{pend} = ''; return;
		}
		substr($s->{pend}, 0, $w) = '';
	} }
while (grep { $_->{in} || length $_->{pend} } @s) {
	my $rin = '';
	vec($rin, $_->{fd}, 1) = 1 for grep { $_->{in} && !length $_->{pend} } @s;
	my $rout;
	my $full = grep { length $_->{pend} } @s;
	if (select($rout = $rin, undef, undef, $full ? 0.25 : undef) < 0) { next if $!{EINTR}; last }
	for my $s (@s) {
		if (length $s->{pend}) { flush($s); next }
		next unless $s->{in} && vec($rout, $s->{fd}, 1);
		my $r = sysread($s->{in}, my $buf, 65536);
		if (!defined $r) { next if $!{EINTR} || $!{EAGAIN}; $r = 0 }
		if ($r == 0) {
			close $s->{in}; $s->{in} = undef;
			$s->{pend} .= "$s->{before}$s->{dropped}$s->{after}\n" if $s->{dropped};
			flush($s);
			next;
		}
		my $keep = $cap - $s->{kept};
		$keep = $r if $keep > $r;
		$keep = 0 if $keep < 0;
		if ($keep) { $s->{pend} .= substr($buf, 0, $keep); $s->{kept} += $keep }
		if ($r > $keep) {
			$s->{pend} .= "\n$s->{cut}" unless $s->{dropped};
			$s->{dropped} += $r - $keep;
		}
		flush($s);
	}
}
`

// Capped is the parent's side of the cappers of one attempt.
type Capped struct {
	parent []*os.File // closed once the process has started
	done   *os.File   // EOF once every capper has exited
	dir    string     // where the log files are: a full disk there holds Wait
}

// Attach makes cmd (not started; its Path and Args as exec.Command set
// them, and the program a POSIX shell that takes -c, like the shim) run
// through capScript, writing its stdout and stderr into stdout and stderr,
// each capped at limit bytes (<= 0: DefaultCap). The files stay the
// caller's to close. After cmd.Start, call Started; after cmd.Wait, Wait.
func Attach(cmd *exec.Cmd, limit int64, stdout, stderr *os.File) (*Capped, error) {
	if limit <= 0 {
		limit = DefaultCap
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW)
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	doneR, doneW, err := os.Pipe()
	if err != nil {
		closeAll(outR, outW, errR, errW)
		return nil, fmt.Errorf("log pipe: %w", err)
	}
	ob, oa := noticeParts("stdout", limit)
	eb, ea := noticeParts("stderr", limit)
	// The shell runs capScript, which runs the original command line:
	// a shell script in a subshell, anything else as "$@".
	args := []string{cmd.Args[0], "-c", capScript, WrapperName, strconv.FormatInt(limit, 10), ob, oa, eb, ea,
		CutNotice("stdout", limit), CutNotice("stderr", limit), perlCapper}
	if len(cmd.Args) >= 4 && cmd.Args[1] == "-c" {
		args = append(append(args, cmd.Args[2]), cmd.Args[4:]...)
	} else {
		args = append(append(args, "", cmd.Path), cmd.Args[1:]...)
	}
	cmd.Args = args
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.ExtraFiles = []*os.File{outR, errR, stdout, stderr, doneW}
	return &Capped{parent: []*os.File{outR, outW, errR, errW, doneW}, done: doneR, dir: filepath.Dir(stdout.Name())}, nil
}

// Started closes the parent's copies of the pipes: from now on only the
// attempt's processes hold them. Call it after cmd.Start, whether it
// succeeded or not (then also call Wait, or Close).
func (c *Capped) Started() {
	closeAll(c.parent...)
	c.parent = nil
}

// Wait waits, after the process has exited, until the cappers have put
// the last of its output into the files, so that a reader of the logs
// that starts now misses nothing. A process the command left behind that
// holds the pipes open keeps the cappers going: Wait gives up after
// grace, the output left to come is still capped. While the log's disk
// is full, the cappers hold output they could not write yet, and Wait
// waits on, past grace, until they have written it: the last of an
// attempt's output is never read before it is in the log.
func (c *Capped) Wait(grace time.Duration) {
	ch := make(chan struct{})
	go func() {
		var b [1]byte
		_, _ = c.done.Read(b[:]) // EOF: no capper holds the pipe any more
		close(ch)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	for {
		select {
		case <-ch:
			c.Close()
			return
		case <-t.C:
		}
		if _, full := Full(c.dir); !full {
			c.Close()
			return
		}
		t.Reset(fullPoll)
	}
}

// Close releases the parent's files.
func (c *Capped) Close() {
	closeAll(c.parent...)
	c.parent = nil
	if c.done != nil {
		c.done.Close()
		c.done = nil
	}
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}
