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
}
