#!/usr/bin/env bash
# phase.sh NAME COMMAND [ARG]...: one phase of `make test`. It runs COMMAND
# and then prints one line: the phase's name, whether it passed (or its exit
# status) and how long it took. The line is also added to the file named by
# $NIUMA_PHASES, if set, from which `make test` prints every phase's line
# again at its end. The exit status is COMMAND's.
set -uo pipefail
if [ $# -lt 2 ]; then
	echo "usage: scripts/phase.sh NAME COMMAND [ARG]..." >&2
	exit 2
fi
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
secs=$(($(date +%s) - start))
took=$(printf '%dm%02ds' $((secs / 60)) $((secs % 60)))
if [ "$rc" -eq 0 ]; then
	line="make test: $name: passed in $took"
else
	line="make test: $name: FAILED (exit $rc) after $took"
fi
echo "$line"
if [ -n "${NIUMA_PHASES:-}" ]; then
	echo "$line" >>"$NIUMA_PHASES"
fi
exit "$rc"
