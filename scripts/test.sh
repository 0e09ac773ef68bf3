#!/usr/bin/env bash
# `npm test`: the same preparation as `npm run up`, then the type check and the whole jest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_dependencies
ensure_chromium
ensure_pgbouncer
ensure_clamav
bash scripts/services.sh
export NODE_ENV=test
say "type-checking"
npx tsc --noEmit -p tsconfig.json
report=$(mktemp)
stall_report=$(mktemp)
cluster_report=$(mktemp)
status=0
if [ "$#" -eq 0 ]; then
  # The stall tests measure, in milliseconds, how long a real API process keeps /healthz waiting: they run on
  # their own after the parallel suite, so the CPU of other test files is not counted against the service.
  npx jest --json --outputFile="$report" --testPathIgnorePatterns '/test/stall\.test\.ts$' || status=$?
  say "stall tests (alone)"
  npx jest --json --outputFile="$stall_report" --runInBand test/stall.test.ts || status=$?
  # The intake, exactly-once, SIGKILL and dashboard suites once more on a three-master Redis Cluster that
  # the run starts from the system's redis-server (issue 20). test/redis-cluster.test.ts starts a cluster of its own.
  say "Redis Cluster suites"
  HD_TEST_REDIS=cluster npx jest --json --outputFile="$cluster_report" \
    test/ingest.test.ts test/ingest-batch.test.ts test/webhooks.test.ts test/faults/ingest-worker-kill.test.ts test/ops.test.ts || status=$?
else
  npx jest --json --outputFile="$report" "$@" || status=$?
fi
node -e '
  const fs = require("fs");
  const runs = process.argv.slice(1).filter((f) => fs.statSync(f).size > 0).map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
  const sum = (k) => runs.reduce((n, r) => n + r[k], 0);
  console.log(`tests: ${sum("numPassedTests")} passed, ${sum("numFailedTests")} failed, ${sum("numPendingTests")} skipped`);
' "$report" "$stall_report" "$cluster_report" || true
rm -f "$report" "$stall_report" "$cluster_report"
exit "$status"
