#!/usr/bin/env bash
# `npm test`: the same preparation as `npm run up`, then the type check and the whole jest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_dependencies
ensure_chromium
bash scripts/services.sh
export NODE_ENV=test
say "type-checking"
npx tsc --noEmit -p tsconfig.json
report=$(mktemp)
status=0
npx jest --json --outputFile="$report" "$@" || status=$?
node -e '
  const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
  console.log(`tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests} skipped`);
' "$report" || true
rm -f "$report"
exit "$status"
