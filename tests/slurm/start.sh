#!/usr/bin/env bash
# A one-node Slurm cluster with accounting on this machine, for the tests that run the project's Slurm path for real
# (tests/test_slurm_real.py, `pytest -m slurm`; docs/cluster.md). As root, on Debian or Ubuntu:
#
#     tests/slurm/start.sh        # installs what is missing, writes the configuration, starts what is not running
#     tests/slurm/stop.sh         # stops what start.sh started
#
# Debian's packages (slurmctld, slurmd, slurmdbd, slurm-client, munge, mariadb-server) are installed when missing.
# The configuration is written for this machine (its host name, CPUs and memory, from `slurmd -C`): one node, one
# partition `debug` (the default), accounting through slurmdbd into MariaDB's slurm_acct_db, an account `infiloop`
# for root (and for $SUDO_USER), and a QOS `cpu1` that allows one CPU per job (a limit the tests exceed on purpose).
# The daemons started are munged, mariadbd, slurmdbd, slurmctld and slurmd, each only when it is not running; their
# logs, pid files and state are in $INFILOOP_SLURM_STATE (default /var/lib/infiloop-slurm). Jobs run with the nice
# value of slurmd, which is this script's: `nice -n 10 tests/slurm/start.sh` keeps them behind other work.
# It ends when `sinfo` shows the node idle, and exits non-zero, with the log to read, when it cannot.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${INFILOOP_SLURM_STATE:-/var/lib/infiloop-slurm}
CONF_DIR=/etc/slurm
MARK="Written by tests/slurm/start.sh (infiloop)"
PACKAGES=(slurmctld slurmd slurmdbd slurm-client munge mariadb-server)
started_at=$SECONDS

say() { echo "[slurm] $*"; }
die() { echo "error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "tests/slurm/start.sh starts system daemons: run it as root"
command -v apt-get >/dev/null 2>&1 || die "tests/slurm/start.sh installs Debian's Slurm packages: no apt-get here"

# ------------------------------------------------------------------------------------------ packages
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${missing[@]}" >"/tmp/infiloop-slurm-apt.log" 2>&1 \
        || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" \
             >"/tmp/infiloop-slurm-apt.log" 2>&1; } \
        || die "apt-get install ${missing[*]} failed: see /tmp/infiloop-slurm-apt.log"
fi

mkdir -p "$STATE"/{log,slurmctld,slurmd} "$CONF_DIR"
touch "$STATE/started"
mark_started() { grep -qx "$1" "$STATE/started" || echo "$1" >>"$STATE/started"; }
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
wait_for() {  # wait_for SECONDS WHAT COMMAND...: until the command succeeds
    local limit=$1 what=$2; shift 2
    for _ in $(seq "$((limit * 4))"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
    die "$what did not come up in $limit s"
}

# ------------------------------------------------------------------------------------------ configuration
for f in slurm.conf slurmdbd.conf; do
    if [ -e "$CONF_DIR/$f" ] && ! grep -q "$MARK" "$CONF_DIR/$f"; then
        die "$CONF_DIR/$f exists and was not written by this script: this machine has a Slurm of its own; not touched"
    fi
done
host=$(hostname -s)
node=$(slurmd -C | head -1)
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$node"; }
password_file=$STATE/db-password
[ -s "$password_file" ] || (umask 077; head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$password_file")
password=$(cat "$password_file")
render() {
    sed -e "s|@HOST@|$host|g" -e "s|@STATE@|$STATE|g" -e "s|@CPUS@|$(field CPUs)|g" -e "s|@BOARDS@|$(field Boards)|g" \
        -e "s|@SOCKETS@|$(field SocketsPerBoard)|g" -e "s|@CORES@|$(field CoresPerSocket)|g" \
        -e "s|@THREADS@|$(field ThreadsPerCore)|g" -e "s|@MEMORY@|$(field RealMemory)|g" -e "s|@PASSWORD@|$password|g" \
        "$HERE/$1.in"
}
(umask 077; render slurmdbd.conf >"$CONF_DIR/slurmdbd.conf.new")
render slurm.conf >"$CONF_DIR/slurm.conf.new"
changed=0
cmp -s "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf" 2>/dev/null || changed=1
mv "$CONF_DIR/slurm.conf.new" "$CONF_DIR/slurm.conf"
mv "$CONF_DIR/slurmdbd.conf.new" "$CONF_DIR/slurmdbd.conf"

# ------------------------------------------------------------------------------------------ munge
munge_ok() { munge -n | unmunge; }
if ! munge_ok >/dev/null 2>&1; then
    if [ ! -s /etc/munge/munge.key ]; then
        mungekey --create --keyfile /etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    mark_started munged
    wait_for 20 munged munge_ok
fi

# ------------------------------------------------------------------------------------------ MariaDB
db_ok() { mariadb-admin --protocol=socket ping; }
if ! db_ok >/dev/null 2>&1; then
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >"$STATE/log/mariadb-install.log" 2>&1
    mkdir -p /run/mysqld
    chown mysql:mysql /run/mysqld
    say "starting mariadbd"
    setsid mariadbd --user=mysql --pid-file=/run/mysqld/infiloop.pid </dev/null >>"$STATE/log/mariadb.log" 2>&1 &
    mark_started mariadb
    wait_for 60 "mariadbd (see $STATE/log/mariadb.log)" db_ok
fi
mariadb --protocol=socket <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$password';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$password';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL

# ------------------------------------------------------------------------------------------ slurmdbd, the account
if ! alive "$STATE/slurmdbd.pid"; then
    say "starting slurmdbd"
    slurmdbd
    mark_started slurmdbd
fi
wait_for 60 "slurmdbd (see $STATE/log/slurmdbd.log)" sacctmgr -n list cluster
acct() { sacctmgr -i "$@" >/dev/null 2>&1 || true; }  # "Nothing new added" when it is there already
[ -n "$(sacctmgr -n -P list cluster infiloop format=cluster)" ] || sacctmgr -i add cluster infiloop >/dev/null
acct add account infiloop Cluster=infiloop Description="infiloop tests" Organization=infiloop
acct add qos cpu1
acct modify qos cpu1 set MaxTRESPerJob=cpu=1
for user in root ${SUDO_USER:-}; do
    acct add user "$user" Account=infiloop Cluster=infiloop DefaultAccount=infiloop
    acct modify user "$user" set QOS=normal,cpu1 DefaultQOS=normal
done

# ------------------------------------------------------------------------------------------ slurmctld, slurmd
if ! alive "$STATE/slurmctld.pid"; then
    say "starting slurmctld"
    slurmctld
    mark_started slurmctld
elif [ "$changed" = 1 ]; then
    scontrol reconfigure
fi
wait_for 60 "slurmctld (see $STATE/log/slurmctld.log)" scontrol ping
if ! alive "$STATE/slurmd.pid"; then
    say "starting slurmd"
    slurmd
    mark_started slurmd
fi

node_state() { sinfo -h -N -n "$host" -o %T 2>/dev/null | head -1; }
for _ in $(seq 240); do
    state=$(node_state)
    case "$state" in
        idle) break ;;
        drained|down|down\*|drained\*|fail)  # left so by an interrupted test, or before slurmd registered
            [ -z "$(squeue -h -w "$host" -o %i)" ] && scontrol update NodeName="$host" State=RESUME 2>/dev/null || true ;;
    esac
    sleep 0.25
done
[ "$(node_state)" = idle ] || die "the node $host is '$(node_state)', not idle, after 60 s: see $STATE/log/slurmd.log \
and $STATE/log/slurmctld.log"
say "$(sinfo --version): node $host idle ($(field CPUs) CPUs, $(field RealMemory) MB), partition debug, accounting \
through slurmdbd; ready in $((SECONDS - started_at)) s"
