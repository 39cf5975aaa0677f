#!/bin/sh
# Prints the Debian (or Ubuntu) archive this machine's apt uses and its
# suite, "MIRROR SUITE", for debootstrap: the first enabled `deb` entry of
# the main archive in /etc/apt/sources.list and /etc/apt/sources.list.d/
# (one-line *.list files and deb822 *.sources files), leaving out security
# and -updates/-backports suites, cdrom: and file: sources, and third-party
# repositories (their path is not .../debian or .../ubuntu). Prints nothing
# and exits 1 when there is none.
#
#   scripts/apt-source.sh [ROOT]    (ROOT: another root to read, for tests)
root=${1:-}
files=""
[ -f "$root/etc/apt/sources.list" ] && files="$root/etc/apt/sources.list"
for f in "$root"/etc/apt/sources.list.d/*.list "$root"/etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] && files="$files $f"
done
[ -n "$files" ] || exit 1
# shellcheck disable=SC2086
awk '
function usable(uri, suite) {
	if (uri !~ /^(https?|ftp):\/\//) return 0
	sub(/\/+$/, "", uri)
	if (uri !~ /\/(debian|ubuntu)$/) return 0
	if (suite ~ /-(security|updates|backports|proposed)$/ || suite ~ /\//) return 0
	return 1
}
function emit(uri, suite) {
	sub(/\/+$/, "", uri)
	print uri, suite
	found = 1
	exit 0
}
# deb822 stanzas (*.sources): fields until a blank line.
function flush(   n, u, s, i, j, us, ss) {
	if (types ~ /(^|[ \t])deb([ \t]|$)/ && tolower(enabled) != "no") {
		n = split(uris, us, /[ \t]+/)
		split(suites, ss, /[ \t]+/)
		for (i = 1; i <= n; i++) for (j in ss) if (us[i] != "" && usable(us[i], ss[j])) emit(us[i], ss[j])
	}
	types = uris = suites = enabled = ""
}
FNR == 1 { if (deb822) flush(); deb822 = (FILENAME ~ /\.sources$/) }
deb822 {
	if ($0 ~ /^[ \t]*$/) { flush(); next }
	if ($0 ~ /^[ \t]*#/) next
	line = $0
	key = tolower(substr(line, 1, index(line, ":") - 1))
	val = substr(line, index(line, ":") + 1)
	gsub(/^[ \t]+|[ \t]+$/, "", val)
	if (key == "types") types = val
	else if (key == "uris") uris = val
	else if (key == "suites") suites = val
	else if (key == "enabled") enabled = val
	next
}
# One-line entries: deb [options] uri suite components...
{
	sub(/#.*/, "")
	if ($1 != "deb") next
	i = 2
	if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
	if (usable($i, $(i + 1))) emit($i, $(i + 1))
}
END { if (!found && deb822) flush(); exit found ? 0 : 1 }
' $files
