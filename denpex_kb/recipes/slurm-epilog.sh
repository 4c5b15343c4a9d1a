#!/usr/bin/env bash
# Slurm epilog: when a job ends, scan its output files and append one JSON line per job (denpex_kb.fleet's schema,
# job = the Slurm job id) to a file that fleet triage reads.
#
#   slurm.conf:  EpilogSlurmctld=/etc/slurm/denpex-epilog.sh   (once per job, on the controller; the job's output
#                                                               files must be readable there: a shared file system)
#           or:  Epilog=/etc/slurm/denpex-epilog.sh            (on every node of the job; only the first node of
#                                                               the allocation writes the line)
#
# Slurm sets SLURM_JOB_ID, SLURM_JOB_STDOUT/SLURM_JOB_STDERR (Slurm 21.08 and later; before, `scontrol show job`
# gives StdOut=/StdErr=) and SLURM_JOB_EXIT_CODE2 ("exit:signal"). Epilogs run without a search path: set
# DENPEX_KB to the denpex-kb executable. DENPEX_EPILOG_OUT is the file to append to (default
# /var/log/denpex-kb/jobs.jsonl); DENPEX_EPILOG_FAILED_ONLY=1 skips jobs that exited 0:0; DENPEX_EPILOG_TIMEOUT
# (seconds, default 120) bounds the scan, which must finish within Slurm's PrologEpilogTimeout.
# The script always exits 0: a failing Epilog drains the node (Slurm's prolog and epilog guide).
set -u
denpex=${DENPEX_KB:-denpex-kb}
out=${DENPEX_EPILOG_OUT:-/var/log/denpex-kb/jobs.jsonl}
job=${SLURM_JOB_ID:-}
[ -n "$job" ] || exit 0

if [ "${SLURM_SCRIPT_CONTEXT:-}" = "epilog_slurmd" ] && [ -n "${SLURM_JOB_NODELIST:-}" ]; then
  first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n 1)
  [ -z "$first" ] || [ "$first" = "${SLURMD_NODENAME:-$(hostname -s)}" ] || exit 0
fi

exit_code=${SLURM_JOB_EXIT_CODE2:-}
if [ "${DENPEX_EPILOG_FAILED_ONLY:-0}" = "1" ] && [ "$exit_code" = "0:0" ]; then
  exit 0
fi

stdout=${SLURM_JOB_STDOUT:-}
stderr=${SLURM_JOB_STDERR:-}
if [ -z "$stdout" ] && [ -z "$stderr" ]; then
  info=$(scontrol show job "$job" 2>/dev/null)
  stdout=$(printf '%s\n' "$info" | tr ' ' '\n' | sed -n 's/^StdOut=//p' | head -n 1)
  stderr=$(printf '%s\n' "$info" | tr ' ' '\n' | sed -n 's/^StdErr=//p' | head -n 1)
fi
files=()
for f in "$stdout" "$stderr"; do
  [ -n "$f" ] && [ -f "$f" ] || continue
  case " ${files[*]-} " in *" $f "*) continue ;; esac  # --output and --error are often the same file
  files+=("$f")
done
[ "${#files[@]}" -gt 0 ] || exit 0

mkdir -p "$(dirname "$out")" 2>/dev/null
line=$(timeout "${DENPEX_EPILOG_TIMEOUT:-120}" "$denpex" scan --jsonl --exit-zero --job "$job" "${files[@]}" 2>/dev/null)
[ -n "$line" ] || exit 0
if command -v flock >/dev/null 2>&1; then
  # Epilogs of jobs ending together append to one file: one writer at a time.
  flock "$out.lock" sh -c 'printf "%s\n" "$1" >> "$2"' sh "$line" "$out"
else
  printf '%s\n' "$line" >> "$out"
fi
exit 0
