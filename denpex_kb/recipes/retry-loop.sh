#!/usr/bin/env bash
# Rerun a training command while denpex-kb says a rerun can help; stop as soon as it says "fix first".
#
#   retry-loop.sh [-n MAX_ATTEMPTS] LOG -- torchrun --nproc-per-node 8 train.py
#
# Each attempt appends its output to LOG. After a failed attempt, `denpex-kb scan LOG --exit-by-verdict` decides:
#   10 retry as is, 11 retry elsewhere (this loop cannot move the job: it stops and prints what to exclude),
#   12 fix first, 13 unknown failure. TorchElastic's own --max-restarts restarts on any failure; run torchrun with
#   --max-restarts 0 under this loop so a code bug is not rerun.
set -uo pipefail
max=3
if [ "${1:-}" = "-n" ]; then max=$2; shift 2; fi
log=${1:?usage: retry-loop.sh [-n MAX] LOG -- COMMAND...}; shift
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || { echo "retry-loop.sh: no command given" >&2; exit 2; }
attempt=1
while :; do
  : > "$log.attempt"
  "$@" 2>&1 | tee -a "$log" "$log.attempt"
  status=${PIPESTATUS[0]}
  [ "$status" -eq 0 ] && { rm -f "$log.attempt"; exit 0; }
  denpex-kb scan "$log.attempt" --exit-by-verdict --exclude-file "$log.exclude" > "$log.verdict"
  verdict=$?
  head -n 1 "$log.verdict" >&2
  if [ "$verdict" -eq 10 ] && [ "$attempt" -lt "$max" ]; then
    attempt=$((attempt + 1))
    echo "retry-loop.sh: attempt $attempt of $max" >&2
    continue
  fi
  if [ "$verdict" -eq 11 ]; then
    echo "retry-loop.sh: rerun this job on other nodes; exclude: $(paste -sd, "$log.exclude")" >&2
  fi
  exit "$verdict"
done
