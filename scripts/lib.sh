# Shared by up.sh and test.sh. Sourced, not run.
export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/helpdesk}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379}"

say() { printf '[helpdesk] %s\n' "$*" >&2; }

# npm install (which honours the lockfile) only when dependencies are missing or the lockfile changed since the last install.
ensure_dependencies() {
  if [ ! -d node_modules ] || [ ! -f node_modules/.helpdesk-installed ] || [ package-lock.json -nt node_modules/.helpdesk-installed ]; then
    say "installing dependencies (npm install, from package-lock.json)"
    npm install --no-audit --no-fund --loglevel=error
    touch node_modules/.helpdesk-installed
  fi
  use_project_node
}

# The service runs on Node 24 LTS. The `node` dev dependency installs the npm registry's Node 24 binary as
# node_modules/.bin/node; put it first on PATH (as `npm run` does, but also when a script is run with bash
# directly) and forget any `node` bash looked up before the install, so every later node, npx, tsx, tsc and
# jest runs on it rather than on an older system Node.
use_project_node() {
  if [ -x "$PWD/node_modules/.bin/node" ]; then
    case ":$PATH:" in
      "$PWD/node_modules/.bin:"*) ;;
      *) export PATH="$PWD/node_modules/.bin:$PATH" ;;
    esac
  fi
  hash -r
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$major" -lt 24 ]; then
    say "node $(node --version) is older than the Node 24 this service needs, and node_modules/.bin/node is missing: run npm install"
    exit 1
  fi
  say "node $(node --version) ($(command -v node))"
}

# The browser check (test/browser.test.ts) drives Debian's chromium through playwright-core. Install it when it is
# missing and this user can (root with apt-get); otherwise, or when the install fails, say so loudly and carry on:
# the test then skips with its own warning instead of failing npm test.
ensure_chromium() {
  local bin=/usr/bin/chromium
  [ -x "$bin" ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium package for the browser check (apt-get install chromium)"
    if DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && [ -x "$bin" ]; then
      return 0
    fi
    say "WARNING: installing chromium failed, so the browser check of /docs and /admin/queues will be SKIPPED"
  else
    say "WARNING: $bin is missing and this user cannot install it (needs root and apt-get), so the browser check of /docs and /admin/queues will be SKIPPED"
  fi
  return 0
}

# PgBouncer for the transaction-pooling suite (test/pgbouncer.test.ts): Debian's package, installed like chromium.
ensure_pgbouncer() {
  if [ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's pgbouncer package for the transaction-pooling suite (apt-get install pgbouncer)"
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null 2>&1 ||
      { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null; }; then
      # The package starts a service of its own where it can; the suite runs its own on a free port.
      command -v service >/dev/null 2>&1 && service pgbouncer stop >/dev/null 2>&1 || true
      return 0
    fi
    say "WARNING: installing pgbouncer failed, so the PgBouncer suite will be SKIPPED"
  else
    say "WARNING: pgbouncer is missing and this user cannot install it (needs root and apt-get), so the PgBouncer suite will be SKIPPED"
  fi
  return 0
}

# clamd for the virus-scanning suite (test/scan.test.ts): Debian's clamav-daemon, installed like pgbouncer. The
# suite runs a clamd of its own on a free loopback port with a signature database it writes (EICAR), so no
# signatures are downloaded: freshclam (a dependency of the package) is stopped like the package's own clamd.
ensure_clamav() {
  if [ -x /usr/sbin/clamd ] || command -v clamd >/dev/null 2>&1; then return 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's clamav-daemon package for the virus-scanning suite (apt-get install clamav-daemon)"
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clamav-daemon >/dev/null 2>&1 ||
      { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clamav-daemon >/dev/null; }; then
      if command -v service >/dev/null 2>&1; then
        service clamav-freshclam stop >/dev/null 2>&1 || true
        service clamav-daemon stop >/dev/null 2>&1 || true
      fi
      [ -x /usr/sbin/clamd ] && return 0
    fi
    say "WARNING: installing clamav-daemon failed, so the virus-scanning suite's real-clamd tests will be SKIPPED"
  else
    say "WARNING: clamd is missing and this user cannot install it (needs root and apt-get), so the virus-scanning suite's real-clamd tests will be SKIPPED"
  fi
  return 0
}
