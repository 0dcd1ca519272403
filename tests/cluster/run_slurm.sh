#!/usr/bin/env bash
# A one-node Slurm cluster, started and stopped here, runs planned sweeps as job arrays
# (docs/campaigns.md, "On a cluster"): a virtual sweep of 8 runs, merged and compared with the
# same sweep on one machine (its summary byte for byte), then one 20-second PostgreSQL run.
#
#   tests/cluster/run_slurm.sh path/to/experiment
#
# Needs root (the daemons run as root here) and Debian's slurm-wlm and munge, installed when
# missing. Everything lives in one temporary directory: munged with its own key and socket
# (munged(8): --key-file, --socket), slurmctld and slurmd in the foreground (-D) with their own
# slurm.conf (SLURM_CONF, slurm.conf(5)) on free ports, and the plans. Every daemon started here
# is stopped by its process id and the directory removed, whatever happens. A cluster that does
# not start fails with one line.
set -euo pipefail
experiment=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)

need=()
[ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && command -v sbatch > /dev/null || need+=(slurm-wlm)
[ -x /usr/sbin/munged ] || need+=(munge)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update > /dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y "${need[@]}" > /dev/null
fi

tmp=$(mktemp -d /tmp/snowleak-slurm.XXXXXX)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2> /dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2> /dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# fail LINE: the cluster did not start; one line, the daemons' last log line in it.
fail() {
    local last
    last=$(tail -qn 1 "$tmp"/*.log 2> /dev/null | tr '\n' ' ' | cut -c1-300)
    echo "run_slurm.sh: the one-node Slurm cluster did not start: $1 (last log lines: ${last:-none})" >&2
    exit 1
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# munge: a key of its own (1,024 random bytes, read-only), its socket in this directory.
mkdir -m 700 "$tmp/munge"
head -c 1024 /dev/urandom > "$tmp/munge/munge.key"
chmod 400 "$tmp/munge/munge.key"
/usr/sbin/munged --foreground --force --key-file="$tmp/munge/munge.key" \
    --socket="$tmp/munge/munge.socket.2" --pid-file="$tmp/munge/munged.pid" \
    --seed-file="$tmp/munge/munged.seed" --log-file="$tmp/munged.log" > /dev/null 2>&1 &
pids+=($!)

node=$(hostname -s)
cpus=$(nproc)
mkdir -p "$tmp/state" "$tmp/spool"
export SLURM_CONF="$tmp/slurm.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=snowleak
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket.2
CredType=cred/munge
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerParameters=batch_sched_delay=0
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$node CPUs=$cpus State=UNKNOWN
PartitionName=ci Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

for _ in $(seq 50); do
    [ -S "$tmp/munge/munge.socket.2" ] && break
    sleep 0.1
done
[ -S "$tmp/munge/munge.socket.2" ] || fail "munged made no socket"
/usr/sbin/slurmctld -D -c -i -f "$SLURM_CONF" > /dev/null 2>&1 &
pids+=($!)
/usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$node" > /dev/null 2>&1 &
pids+=($!)
state=
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ]; do
    state=$(timeout 5 sinfo -h -n "$node" -o %T 2> /dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.2
done
[ "$state" = idle ] || fail "node $node is '${state:-unknown}' after 30 s, not idle"
echo "== a one-node Slurm cluster: $node, $cpus CPUs ($(sinfo --version))"

# A planned virtual sweep of 8 runs as a job array, merged, against the same sweep on one machine.
sweep=(--seeds 1-8 --duration 10m --poller naive --poller compensated:k=1s)
"$experiment" sweep "${sweep[@]}" --plan "$tmp/virtual"
start=$(date +%s)
sbatch --wait --quiet "$tmp/virtual/slurm.sh"
echo "== the array of 8 ended in $(($(date +%s) - start)) s"
"$experiment" sweep merge "$tmp/virtual"
"$experiment" sweep merge "$tmp/virtual" --json > "$tmp/merged.json"
"$experiment" sweep "${sweep[@]}" --out "$tmp/one" --no-plots --json > "$tmp/one.json"
python3 "$here/same_summary.py" "$tmp/one.json" "$tmp/merged.json" 8

# One 20-second PostgreSQL run through the array.
"$experiment" sweep --target postgres --seeds 1 --duration 20s --plan "$tmp/postgres"
sbatch --wait --quiet "$tmp/postgres/slurm.sh" || {
    cat "$tmp"/postgres/logs/*.out >&2
    exit 1
}
"$experiment" sweep merge "$tmp/postgres"
"$experiment" sweep merge "$tmp/postgres" --json > "$tmp/postgres.json"
python3 - "$tmp/postgres.json" "$node" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
assert v["plan"]["finished"] == 1 and not v["missing"] and not v["failed"], v
assert v["summary"]["runs"] == 1 and v["runs"][0]["rows"] > 0, v["summary"]
assert [m["node"] for m in v["machines"]] == [sys.argv[2]], v["machines"]
print("== the PostgreSQL run through the array: %d rows, on %s" % (v["runs"][0]["rows"], sys.argv[2]))
PY
