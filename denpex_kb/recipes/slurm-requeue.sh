#!/usr/bin/env bash
# Inside an sbatch script (submitted with --requeue): run the step, and when it fails let denpex-kb decide.
#
#   #SBATCH --requeue
#   slurm-requeue.sh train.log -- srun torchrun --nnodes "$SLURM_NNODES" --nproc-per-node 8 ... train.py
#
# Verdict 10 (retry as is): requeue the job. 11 (retry elsewhere): add the named nodes to the job's excluded
# nodes, then requeue; a single-node job with no host in the log excludes the node it ran on. 12 and 13: leave
# the job failed for a person (the verdict is in LOG.verdict). At most DENPEX_MAX_REQUEUES requeues (default 3),
# counted by Slurm's SLURM_RESTART_COUNT.
set -uo pipefail
log=${1:?usage: slurm-requeue.sh LOG -- COMMAND...}; shift
[ "${1:-}" = "--" ] && shift
"$@" 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] && exit 0
denpex-kb scan "$log" --exit-by-verdict --exclude-file "$log.exclude" > "$log.verdict"
verdict=$?
head -n 1 "$log.verdict" >&2
if [ "${SLURM_RESTART_COUNT:-0}" -ge "${DENPEX_MAX_REQUEUES:-3}" ]; then
  echo "slurm-requeue.sh: requeued ${SLURM_RESTART_COUNT:-0} times already; not again" >&2
  exit "$status"
fi
case "$verdict" in
  10)
    scontrol requeue "$SLURM_JOB_ID" ;;
  11)
    nodes=$(paste -sd, "$log.exclude")
    if [ -z "$nodes" ] && [ "${SLURM_JOB_NUM_NODES:-1}" -eq 1 ] && [ -n "${SLURMD_NODENAME:-}" ]; then
      nodes=$SLURMD_NODENAME
    fi
    if [ -n "$nodes" ]; then
      scontrol update JobId="$SLURM_JOB_ID" ExcNodeList="$nodes"
    else
      echo "slurm-requeue.sh: the log names no host to exclude; requeueing as is" >&2
    fi
    scontrol requeue "$SLURM_JOB_ID" ;;
esac
exit "$status"
