#!/usr/bin/env bash
# Runs one stage of `make test` (a molecule scenario, the integration tests) with its whole output
# in $GPUFLEET_TEST_LOGS/NAME.log, then prints that log as one block headed by the stage's result,
# its wall time and the CPU time of its processes (user + system of the stage's command and every
# process it waited for; a container's own processes are not among them), so that stages running
# at the same time stay readable and each stage shows what it costs. Exits with the stage's status.
#   usage: stage.sh NAME COMMAND [ARG...]
#          stage.sh --report   (after the stages: each failed stage's name and the lines of its log
#                              that say why, short enough to be in the last lines of make's output)
# STAGE_NICE (default 0): the stage runs at this niceness (make test runs every stage but the
# critical path's at TEST_NICE, so that the longest stage keeps its pace on a small machine).
# STAGE_T0 (optional, seconds since the epoch: when make test's pool began): the start and end lines
# say when, as "+N s" from it, so that a run's log shows which stages overlapped and what ran last.
set -uo pipefail
name=${1:?usage: stage.sh NAME COMMAND [ARG...] | --report}
shift
logs=${GPUFLEET_TEST_LOGS:-.cache/test-logs}
failed_list="$logs/.failed"
if [[ $name == --report ]]; then
  # a CI page shows only the end of the output: name what failed, and why, last
  [[ -s $failed_list ]] || exit 0
  while read -r stage; do
    echo "=== FAILED: $stage; the last lines of $logs/$stage.log that say why:"
    grep -E 'fatal:|FAILED|CRITICAL|ERROR|Error|Traceback|assert|SystemExit|timed out|UNREACHABLE' "$logs/$stage.log" |
      grep -v 'RETRYING\|failed=0' | tail -n 12 | cut -c1-400
  done <"$failed_list"
  echo "=== failed stages: $(tr '\n' ' ' <"$failed_list")"
  exit 0
fi
nice_level=${STAGE_NICE:-0}
if ! [[ $nice_level =~ ^[0-9]+$ ]] || ((nice_level > 19)); then
  echo "stage.sh: STAGE_NICE must be 0..19, not '$nice_level'" >&2
  exit 2
fi
t0=${STAGE_T0:-}
if [[ -n $t0 ]] && ! [[ $t0 =~ ^[0-9]+$ ]]; then
  echo "stage.sh: STAGE_T0 must be seconds since the epoch, not '$t0'" >&2
  exit 2
fi
at() { [[ -n $t0 ]] && printf ' at +%d s' "$(($(date +%s) - t0))"; }
mkdir -p "$logs"
log="$logs/$name.log"
echo "=== $name started$(at) (log: $log$( ((nice_level > 0)) && echo ", nice $nice_level"))"
start=$SECONDS
nice -n "$nice_level" "$@" >"$log" 2>&1 </dev/null
rc=$?
result=$([[ $rc -eq 0 ]] && echo "passed" || echo "FAILED (exit $rc)")
# `times` (a builtin: run in this shell, not in a pipe's subshell, which has no children of its
# own): the shell's user/system, then its children's (what this stage ran), as 1m2.345s
times >"$log.times"
cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, p, "m"); s += p[1] * 60 + p[2] } printf "%.0f", s }' "$log.times")
rm -f "$log.times"
# one block at a time: stages that end together do not interleave their logs
{
  flock 9
  echo "=== $name: begin of log"
  cat "$log"
  echo "=== $name $result in $((SECONDS - start)) s (CPU ${cpu} s)$(at)"
  if ((rc != 0)); then echo "$name" >>"$failed_list"; fi
} 9>"$logs/.print.lock"
exit "$rc"
