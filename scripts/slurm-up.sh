#!/usr/bin/env bash
# slurm-up.sh: a real single-node Slurm cluster on this machine, from
# Debian's packages, for Niuma's Slurm executor and its tests.
#
#   scripts/slurm-up.sh                   cluster "niuma": accounting through slurmdbd + MariaDB
#                                          (sacct works), config in /etc/slurm
#   scripts/slurm-up.sh --no-accounting   cluster "niuma-noacct": no slurmdbd (sacct is off),
#                                          jobs forgotten 2 s after they end (MinJobAge),
#                                          config in /etc/slurm-noacct (SLURM_CONF=/etc/slurm-noacct/slurm.conf)
#   scripts/slurm-up.sh --down [--no-accounting]   stop that cluster's daemons
#   scripts/slurm-up.sh --status [--no-accounting] say whether it answers (exit 0) or not (exit 1)
#
# Both clusters can run at once on one machine (other ports, state and
# spool directories, job ids from 1 and from 1000000). The node is this
# machine under its short hostname, with 4 GPUs declared as GRES
# (AutoDetect=off, File= pointing at placeholder character devices, twins
# of /dev/null: no NVIDIA device or driver is needed, and Slurm still hands
# out GPU indexes, so a job sees CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS;
# slurmd refuses plain files there). The accounting cluster enforces memory
# through cgroups (task/cgroup, where the machine has the cgroup v1 memory
# controller or systemd); the other through the step's own memory polling
# (jobacct_gather/linux with OverMemoryKill), as sites without cgroups do.
#
# Idempotent: it installs what is missing, rewrites a config only when it
# differs (and then restarts what reads it), starts what is not running,
# and returns within a second or two when everything is already up. It
# says what it does on stdout. Needs root (or sudo).
set -euo pipefail

MODE=accounting
ACTION=up
for a in "$@"; do
	case "$a" in
	--no-accounting) MODE=noacct ;;
	--accounting) MODE=accounting ;;
	--down) ACTION=down ;;
	--status) ACTION=status ;;
	-h | --help)
		sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "slurm-up: unknown argument $a (try --help)" >&2
		exit 2
		;;
	esac
done

say() { echo "slurm-up: $*"; }
die() {
	echo "slurm-up: $*" >&2
	exit 1
}

SUDO=""
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || die "run as root (or install sudo): it installs packages and starts daemons"
	SUDO=sudo
fi

NODE=$(hostname -s)
GPUS=4
CPUS=4
MEM_MIB=4096
if [ "$MODE" = accounting ]; then
	CLUSTER=niuma
	CONF_DIR=/etc/slurm
	CTLD_PORT=6817
	SLURMD_PORT=6818
	DBD_PORT=6819
	FIRST_JOB=1
	MIN_JOB_AGE=300
else
	CLUSTER=niuma-noacct
	CONF_DIR=/etc/slurm-noacct
	CTLD_PORT=6827
	SLURMD_PORT=6828
	FIRST_JOB=1000000
	MIN_JOB_AGE=2
fi
STATE=/var/lib/niuma-slurm/$CLUSTER
LOGS=/var/log/niuma-slurm/$CLUSTER
RUN=/run/niuma-slurm/$CLUSTER
CONF=$CONF_DIR/slurm.conf
export SLURM_CONF=$CONF

pid_alive() {
	local p
	p=$(cat "$1" 2>/dev/null) && [ -n "$p" ] && $SUDO kill -0 "$p" 2>/dev/null
}

stop_pid() { # name pidfile
	if pid_alive "$2"; then
		say "stopping $1 (pid $(cat "$2" 2>/dev/null))"
		$SUDO kill "$(cat "$2" 2>/dev/null)" 2>/dev/null || true
		for _ in $(seq 50); do pid_alive "$2" || break; sleep 0.1; done
		if pid_alive "$2"; then $SUDO kill -9 "$(cat "$2" 2>/dev/null)" 2>/dev/null || true; fi
	fi
}

if [ "$ACTION" = down ]; then
	stop_pid slurmd "$RUN/slurmd.pid"
	stop_pid slurmctld "$RUN/slurmctld.pid"
	[ "$MODE" = accounting ] && stop_pid slurmdbd "$RUN/slurmdbd.pid"
	say "cluster $CLUSTER is down (munge and MariaDB are left running for the other cluster)"
	exit 0
fi

ctld_up() { timeout 10 scontrol ping 2>/dev/null | grep -q "is UP"; }
node_state() { timeout 10 sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -1; }

if [ "$ACTION" = status ]; then
	if ctld_up && [ -n "$(node_state)" ]; then
		say "cluster $CLUSTER answers: node $NODE is $(node_state) (SLURM_CONF=$CONF)"
		exit 0
	fi
	say "cluster $CLUSTER does not answer (start it with: scripts/slurm-up.sh$([ "$MODE" = noacct ] && echo " --no-accounting"))"
	exit 1
fi

# --- packages -------------------------------------------------------------
PKGS="slurm-wlm slurm-client munge"
[ "$MODE" = accounting ] && PKGS="$PKGS slurmdbd mariadb-server"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	say "installing Debian packages:$missing"
	$SUDO apt-get update -q >/dev/null
	# No daemon is started by the packages' scripts: this script starts them.
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null
fi

$SUDO mkdir -p "$STATE/ctld" "$STATE/d" "$STATE/gpu" "$LOGS" "$RUN" "$CONF_DIR"
$SUDO chown -R slurm:slurm "$STATE/ctld" "$LOGS"

# --- configuration --------------------------------------------------------
CHANGED=""
# install_conf PATH MODE OWNER: the config on stdin replaces PATH if it differs.
install_conf() {
	local tmp
	tmp=$(mktemp)
	cat >"$tmp"
	if ! $SUDO cmp -s "$tmp" "$1" 2>/dev/null; then
		say "writing $1"
		$SUDO install -m "$2" -o "$3" -g "$3" "$tmp" "$1"
		CHANGED="$CHANGED $(basename "$1")"
	fi
	rm -f "$tmp"
}

# Placeholder device files for the GPUs: slurmd wants File= to name
# character devices, to give each GPU an index (CUDA_VISIBLE_DEVICES,
# SLURM_JOB_GPUS). They are /dev/null's twins (major 1, minor 3): harmless
# if anything opens them; nothing constrains by them (ConstrainDevices=no).
for i in $(seq 0 $((GPUS - 1))); do
	f=$STATE/gpu/nvidia$i
	if [ ! -c "$f" ]; then
		$SUDO rm -f "$f"
		$SUDO mknod -m 666 "$f" c 1 3
		CHANGED="$CHANGED gpu-devices"
	fi
done

# Memory limits through cgroups need the v1 memory controller, or cgroup v2
# under systemd (Slurm 22.05's v2 plugin asks systemd for its scope);
# elsewhere slurmstepd's own polling enforces them.
CGROUPS=yes
if [ ! -d /sys/fs/cgroup/memory ] && [ "$(cat /proc/1/comm 2>/dev/null)" != systemd ]; then
	CGROUPS=no
fi
if [ "$MODE" = accounting ] && [ "$CGROUPS" = no ]; then
	say "no cgroup v1 memory controller and no systemd here: memory limits are enforced by slurmstepd's polling"
fi
TRACK="JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=task=5
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup"
POLL="JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none"
[ "$CGROUPS" = yes ] || TRACK=$POLL

if [ "$MODE" = accounting ]; then
	ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations,limits,qos
$TRACK"
else
	ACCT="AccountingStorageType=accounting_storage/none
$POLL"
fi

install_conf "$CONF" 644 root <<EOF
# Written by Niuma's scripts/slurm-up.sh ($MODE): a one-node cluster for Niuma's Slurm executor.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
FirstJobId=$FIRST_JOB
MinJobAge=$MIN_JOB_AGE
KillWait=5
ReturnToService=2
SlurmdTimeout=60
SlurmctldTimeout=30
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
# This machine may have fewer cores than declared: take the config's word.
SlurmdParameters=config_overrides
GresTypes=gpu
JobRequeue=0
MpiDefault=none
$ACCT
NodeName=$NODE NodeAddr=127.0.0.1 Port=$SLURMD_PORT CPUs=$CPUS RealMemory=$MEM_MIB Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

install_conf "$CONF_DIR/gres.conf" 644 root <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu File=$STATE/gpu/nvidia[0-$((GPUS - 1))]
EOF

install_conf "$CONF_DIR/cgroup.conf" 644 root <<EOF
CgroupPlugin=autodetect
ConstrainCores=no
ConstrainDevices=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
EOF

# --- munge ----------------------------------------------------------------
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
	if [ ! -s /etc/munge/munge.key ]; then
		say "creating the munge key"
		$SUDO mungekey --create --keyfile=/etc/munge/munge.key
		$SUDO chown munge:munge /etc/munge/munge.key
		$SUDO chmod 400 /etc/munge/munge.key
	fi
	say "starting munged"
	$SUDO mkdir -p /run/munge /var/log/munge /var/lib/munge
	$SUDO chown munge:munge /run/munge /var/log/munge /var/lib/munge
	$SUDO runuser -u munge -- /usr/sbin/munged
	for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
	munge -n | unmunge >/dev/null || die "munged does not answer (see /var/log/munge/munged.log)"
fi

# --- MariaDB and slurmdbd (accounting only) ---------------------------------
if [ "$MODE" = accounting ]; then
	if ! $SUDO mysqladmin ping >/dev/null 2>&1; then
		say "starting MariaDB"
		$SUDO mkdir -p /run/mysqld
		$SUDO chown mysql:mysql /run/mysqld
		if [ ! -d /var/lib/mysql/mysql ]; then
			$SUDO mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
		fi
		$SUDO setsid mysqld_safe --user=mysql >/dev/null 2>&1 </dev/null &
		for _ in $(seq 300); do $SUDO mysqladmin ping >/dev/null 2>&1 && break; sleep 0.1; done
		$SUDO mysqladmin ping >/dev/null 2>&1 || die "MariaDB did not start (see /var/log/mysql/error.log)"
	fi
	DBPASS_FILE=$STATE/dbpass
	if [ ! -s "$DBPASS_FILE" ]; then
		head -c 18 /dev/urandom | base64 | tr -d '/+=' | $SUDO tee "$DBPASS_FILE" >/dev/null
		$SUDO chmod 600 "$DBPASS_FILE"
	fi
	DBPASS=$($SUDO cat "$DBPASS_FILE")
	if ! $SUDO mysql -N -e "SELECT 1 FROM mysql.user WHERE user='slurm' AND host='localhost'" | grep -q 1; then
		say "creating the MariaDB user slurm and database slurm_acct_db"
	fi
	$SUDO mysql -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
		ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
		CREATE DATABASE IF NOT EXISTS slurm_acct_db;
		GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"

	install_conf "$CONF_DIR/slurmdbd.conf" 600 slurm <<EOF
# Written by Niuma's scripts/slurm-up.sh.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=slurm
PidFile=$RUN/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DBPASS
StorageLoc=slurm_acct_db
EOF
	case " $CHANGED " in *" slurmdbd.conf "*) stop_pid slurmdbd "$RUN/slurmdbd.pid" ;; esac
	if ! pid_alive "$RUN/slurmdbd.pid"; then
		say "starting slurmdbd"
		$SUDO env SLURM_CONF="$CONF" slurmdbd
		for _ in $(seq 100); do timeout 5 sacctmgr -n -P show cluster >/dev/null 2>&1 && break; sleep 0.2; done
		timeout 5 sacctmgr -n -P show cluster >/dev/null 2>&1 || die "slurmdbd does not answer (see $LOGS/slurmdbd.log)"
	fi
	# The cluster, an account for this machine's users, and a QOS that
	# allows one GPU per user (to see QOSMaxGRESPerUser in action).
	if ! sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; then
		say "registering cluster $CLUSTER with slurmdbd"
		$SUDO sacctmgr -i add cluster "$CLUSTER" >/dev/null
	fi
	if ! sacctmgr -n -P show account format=account | grep -qx lab; then
		say "adding account lab"
		$SUDO sacctmgr -i add account lab cluster="$CLUSTER" description="Niuma test lab" organization=niuma >/dev/null
	fi
fi

# --- slurmctld and slurmd ---------------------------------------------------
if [ -n "$CHANGED" ]; then
	stop_pid slurmd "$RUN/slurmd.pid"
	stop_pid slurmctld "$RUN/slurmctld.pid"
fi
if ! pid_alive "$RUN/slurmctld.pid" || ! ctld_up; then
	stop_pid slurmctld "$RUN/slurmctld.pid"
	say "starting slurmctld for cluster $CLUSTER (port $CTLD_PORT)"
	$SUDO env SLURM_CONF="$CONF" slurmctld -f "$CONF" || die "slurmctld did not start (see $LOGS/slurmctld.log)"
	for _ in $(seq 100); do ctld_up && break; sleep 0.1; done
	ctld_up || die "slurmctld does not answer (see $LOGS/slurmctld.log)"
fi
if ! pid_alive "$RUN/slurmd.pid"; then
	say "starting slurmd on $NODE (port $SLURMD_PORT)"
	$SUDO env SLURM_CONF="$CONF" slurmd -f "$CONF" || die "slurmd did not start (see $LOGS/slurmd.log)"
fi
for _ in $(seq 150); do
	case "$(node_state)" in idle* | mixed* | allocated* | completing*) break ;; esac
	sleep 0.2
done
state=$(node_state)
case "$state" in
idle* | mixed* | allocated* | completing*) ;;
down* | drain* | *)
	say "node $NODE is ${state:-unknown}; resuming it"
	$SUDO scontrol update nodename="$NODE" state=resume 2>/dev/null || true
	for _ in $(seq 50); do
		case "$(node_state)" in idle* | mixed* | allocated*) break ;; esac
		sleep 0.2
	done
	state=$(node_state)
	case "$state" in idle* | mixed* | allocated* | completing*) ;; *) die "node $NODE is $state: $(sinfo -h -R -o '%E' 2>/dev/null) (see $LOGS/slurmd.log)" ;; esac
	;;
esac
# The QOS names gres/gpu, a TRES slurmdbd knows only once slurmctld has
# registered with AccountingStorageTRES=gres/gpu.
if [ "$MODE" = accounting ]; then
	if ! sacctmgr -n -P show qos format=name | grep -qx onegpu; then
		say "adding QOS onegpu (at most 1 GPU per user)"
		$SUDO sacctmgr -i add qos onegpu MaxTRESPerUser=gres/gpu=1 >/dev/null
	fi
	for u in root $(logname 2>/dev/null || true) ${SUDO_USER:-}; do
		if ! sacctmgr -n -P show assoc where user="$u" cluster="$CLUSTER" format=user | grep -qx "$u"; then
			say "adding user $u to account lab"
			$SUDO sacctmgr -i add user "$u" account=lab cluster="$CLUSTER" >/dev/null
		fi
		if ! sacctmgr -n -P show assoc where user="$u" cluster="$CLUSTER" format=qos | grep -q onegpu; then
			$SUDO sacctmgr -i modify user "$u" where cluster="$CLUSTER" set qos+=onegpu >/dev/null
		fi
	done
fi
say "cluster $CLUSTER is up: node $NODE $state, $CPUS CPUs, ${MEM_MIB} MiB, gpu:$GPUS; SLURM_CONF=$CONF"
