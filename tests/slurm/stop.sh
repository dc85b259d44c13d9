#!/usr/bin/env bash
# Stops what tests/slurm/start.sh started (listed in $INFILOOP_SLURM_STATE/started), in the reverse order, each by
# the process id of its pid file; the jobs still in the queue are cancelled first. With names, only those daemons:
#
#     tests/slurm/stop.sh             # every daemon start.sh started: slurmd slurmctld slurmdbd mariadb munged
#     tests/slurm/stop.sh slurmdbd    # accounting alone (tests/test_slurm_real.py; start.sh brings it back)
#
# A daemon that was running before start.sh ran is left running. The packages, the configuration, the database and
# the state directory stay, so that the next start.sh is quick.
set -uo pipefail
STATE=${INFILOOP_SLURM_STATE:-/var/lib/infiloop-slurm}
ORDER=(slurmd slurmctld slurmdbd mariadb munged)
[ -f "$STATE/started" ] || { echo "[slurm] nothing was started by tests/slurm/start.sh"; exit 0; }

pid_file() {
    case $1 in
        munged) echo /run/munge/munged.pid ;;
        mariadb) echo /run/mysqld/infiloop.pid ;;
        *) echo "$STATE/$1.pid" ;;
    esac
}

stop_one() {
    local name=$1 file pid
    file=$(pid_file "$name")
    grep -qx "$name" "$STATE/started" || return 0
    if [ -s "$file" ] && pid=$(cat "$file") && kill -0 "$pid" 2>/dev/null; then
        if [ "$name" = slurmctld ]; then  # the jobs first: nothing of them is left behind
            jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
            [ -z "$jobs" ] || { scancel $jobs 2>/dev/null; for _ in $(seq 60); do
                [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done; }
        fi
        kill -TERM "$pid"
        for _ in $(seq 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -0 "$pid" 2>/dev/null && { echo "[slurm] $name ($pid) did not stop in 30 s: killed"; kill -KILL "$pid"; }
        echo "[slurm] stopped $name ($pid)"
    fi
    sed -i "/^$name\$/d" "$STATE/started"
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ORDER[@]}")
for name in "${ORDER[@]}"; do
    for wanted in "${names[@]}"; do
        [ "$wanted" = "$name" ] && stop_one "$name"
    done
done
for wanted in "${names[@]}"; do
    [[ " ${ORDER[*]} " == *" $wanted "* ]] || { echo "error: stop.sh: no daemon '$wanted' (one of: ${ORDER[*]})" >&2; exit 2; }
done
exit 0
