#!/bin/sh
# Records every fault-* recording: record_faults.sh (healthy, loader sleep,
# leak) then record_more_faults.sh (hang, plateau, spike). Delete
# ../real/fault-* first to record them all again.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/record_faults.sh"
sh "$here/record_more_faults.sh"
