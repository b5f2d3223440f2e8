#!/usr/bin/env bash
# Runs one stage of `make test` (a molecule scenario, the integration tests) with its whole output
# in $GPUFLEET_TEST_LOGS/NAME.log, then prints that log as one block headed by the stage's result
# and wall time, so that stages running at the same time stay readable. Exits with the stage's
# status.
#   usage: stage.sh NAME COMMAND [ARG...]
set -uo pipefail
name=${1:?usage: stage.sh NAME COMMAND [ARG...]}
shift
logs=${GPUFLEET_TEST_LOGS:-.cache/test-logs}
mkdir -p "$logs"
log="$logs/$name.log"
echo "=== $name started (log: $log)"
start=$SECONDS
"$@" >"$log" 2>&1 </dev/null
rc=$?
result=$([[ $rc -eq 0 ]] && echo "passed" || echo "FAILED (exit $rc)")
# one block at a time: stages that end together do not interleave their logs
{
  flock 9
  echo "=== $name: begin of log"
  cat "$log"
  echo "=== $name $result in $((SECONDS - start)) s"
} 9>"$logs/.print.lock"
exit "$rc"
