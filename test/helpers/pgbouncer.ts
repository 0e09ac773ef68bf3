import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually } from './wait';
import { freePort } from './ports';

/** Where Debian's pgbouncer package puts the binary (scripts/lib.sh installs it), or null when absent. */
export const PGBOUNCER = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => existsSync(p)) ?? null;

export interface OwnPgBouncer {
  /** The URL of `database` through the pooler. */
  url(database: string): string;
  stop(): Promise<void>;
}

/**
 * A PgBouncer of the test's own in transaction mode, on a free loopback port, in front of the machine's
 * PostgreSQL (127.0.0.1:5432, trust), with the package's defaults otherwise (so it refuses startup parameters
 * it does not know, as a deployment's would). As root it runs as the postgres user (`-u`), as PgBouncer asks.
 */
export async function startPgBouncer(): Promise<OwnPgBouncer> {
  if (!PGBOUNCER) throw new Error('pgbouncer is not installed (scripts/lib.sh installs Debian\'s package)');
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'hd-pgbouncer-'));
  chmodSync(dir, 0o777);
  const ini = path.join(dir, 'pgbouncer.ini');
  writeFileSync(path.join(dir, 'userlist.txt'), '"postgres" ""\n');
  writeFileSync(
    ini,
    [
      '[databases]',
      '* = host=127.0.0.1 port=5432',
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      'max_client_conn = 500',
      'default_pool_size = 20',
      `logfile = ${path.join(dir, 'pgbouncer.log')}`,
      `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
      '',
    ].join('\n'),
  );
  const asRoot = process.getuid?.() === 0;
  const proc: ChildProcess = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'postgres'] : []), ini], { stdio: 'ignore' });
  const answering = () =>
    new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1', () => (s.end(), resolve(true)));
      s.on('error', () => resolve(false));
    });
  await eventually(async () => ((await answering()) ? true : undefined), 10_000, `pgbouncer on port ${port}`, 50);
  return {
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async stop() {
      if (proc.exitCode === null) await new Promise<void>((resolve) => (proc.once('exit', () => resolve()), proc.kill('SIGTERM')));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
