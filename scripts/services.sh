#!/usr/bin/env bash
# Makes PostgreSQL and Redis answer at DATABASE_URL and REDIS_URL. When nothing answers on a local address,
# starts the system's servers, installing them with apt-get first when running as root and they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

url_part() { node -e 'const u=new URL(process.argv[1]); const d={"postgres:":5432,"postgresql:":5432,"redis:":6379,"rediss:":6379}[u.protocol]; console.log(process.argv[2]==="host"?u.hostname.replace(/^\[|\]$/g,""):(u.port||d))' "$1" "$2"; }
reachable() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
is_local() { case "$1" in 127.*|localhost|::1) return 0 ;; *) return 1 ;; esac; }
can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

wait_for() {
  local host=$1 port=$2 what=$3
  for _ in $(seq 1 60); do reachable "$host" "$port" && return 0; sleep 0.5; done
  say "$what did not start on $host:$port"; exit 1
}

apt_install() {
  if ! can_install; then say "$1 is not installed and this user cannot install it; install $1 or point ${2} at a running server"; exit 1; fi
  say "installing $1 from the system's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}

ensure_postgres() {
  local host port
  host=$(url_part "$DATABASE_URL" host); port=$(url_part "$DATABASE_URL" port)
  reachable "$host" "$port" && return 0
  is_local "$host" || { say "PostgreSQL at $host:$port does not answer"; exit 1; }
  say "PostgreSQL does not answer on $host:$port; starting a local server"
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then apt_install postgresql DATABASE_URL; fi
  local version
  version=$(ls /usr/lib/postgresql | sort -V | tail -1)
  if [ ! -d "/etc/postgresql/$version/main" ]; then pg_createcluster "$version" main -p "$port" >/dev/null; fi
  # A fresh cluster only trusts its socket; the service talks TCP on loopback as in DATABASE_URL.
  local hba="/etc/postgresql/$version/main/pg_hba.conf"
  if [ -w "$hba" ] && ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || pg_ctlcluster "$version" main start
  wait_for "$host" "$port" PostgreSQL
}

ensure_redis() {
  local host port
  host=$(url_part "$REDIS_URL" host); port=$(url_part "$REDIS_URL" port)
  reachable "$host" "$port" && return 0
  is_local "$host" || { say "Redis at $host:$port does not answer"; exit 1; }
  say "Redis does not answer on $host:$port; starting a local server"
  command -v redis-server >/dev/null 2>&1 || apt_install redis-server REDIS_URL
  redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no --dir /tmp >/dev/null
  wait_for "$host" "$port" Redis
}

ensure_postgres
ensure_redis
say "PostgreSQL and Redis answer"
