#!/usr/bin/env bash
# `npm run up`: from a fresh machine to a running API and workers.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_dependencies
bash scripts/services.sh
npx tsx scripts/migrate.ts

# Without a configured realm, a local development realm lets `npm run dev-token` mint access tokens.
if [ -z "${REALM_JWKS_URL:-}" ] && [ -z "${REALM_PUBLIC_KEY:-}" ] && [ "${NODE_ENV:-development}" != production ]; then
  npx tsx scripts/dev-token.ts --ensure-keys >/dev/null
  export REALM_PUBLIC_KEY="$(cat .dev/realm-public.pem)"
  export REALM_ISSUER="urn:helpdesk:dev-realm"
  export REALM_ALGORITHMS="ES256"
  say "development realm: access tokens from 'npm run dev-token' are accepted"
fi

# Without ops credentials, a development login for the queue dashboard and /metrics (production requires them).
if [ -z "${OPS_USER:-}" ] && [ -z "${OPS_PASSWORD:-}" ] && [ "${NODE_ENV:-development}" != production ]; then
  mkdir -p .dev
  [ -s .dev/ops-password ] || node -e "process.stdout.write(require('node:crypto').randomBytes(18).toString('base64url'))" > .dev/ops-password
  export OPS_USER=ops
  OPS_PASSWORD="$(cat .dev/ops-password)"
  export OPS_PASSWORD
fi

port="${PORT:-8080}"
# Each process in a process group of its own (setsid), stopped as a group: npx and tsx each start a child
# node, and a signal to the outer process alone (which is all `kill $pid` sends) left both running.
# V8 flags for every service process (src/lib/node-options.ts says why).
export NODE_OPTIONS="--max-semi-space-size=16"
setsid npx tsx workers/index.ts &
workers=$!
setsid npx tsx src/server.ts &
api=$!
stop() {
  trap - EXIT INT TERM
  kill -TERM -- "-$api" "-$workers" 2>/dev/null || true
  wait "$api" "$workers" 2>/dev/null || true
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

for _ in $(seq 1 60); do
  if node -e "fetch('http://127.0.0.1:$port/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"; then break; fi
  kill -0 "$api" 2>/dev/null || { say "the API exited during start-up"; exit 1; }
  sleep 0.5
done
cat >&2 <<MSG

  Helpdesk API is up:  http://localhost:$port   (readiness: /readyz, API document: /v1/openapi.json, docs: /docs)
  Queue dashboard:     http://localhost:$port/admin/queues   (and /metrics), login $OPS_USER / $OPS_PASSWORD

  First credential:    npm run -s bootstrap -- --workspace "Acme" --owner-email owner@acme.test
                       prints {tenant_id, owner_user_id, api_key: {secret, ...}}; send it as
                       Authorization: Bearer <secret>
  Dev access token:    npm run -s dev-token -- --sub <realm_subject> --tenant <tenant_id> [--email <address>]

MSG
wait "$api"
