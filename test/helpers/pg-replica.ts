import { spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { migratedDatabase } from './db-names';
import { freePort } from './ports';
import { eventually } from './wait';

/** The system's PostgreSQL binaries (Debian: /usr/lib/postgresql/<version>/bin), newest version first. */
function binDir(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  const found = versions.map((v) => path.join(root, v, 'bin')).find((d) => existsSync(path.join(d, 'pg_basebackup')));
  if (!found) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql');
  return found;
}

export interface OwnReplicaPair {
  primaryUrl(database: string): string;
  replicaUrl(database: string): string;
  /** Stops replaying WAL on the replica (it keeps receiving): a replica falling behind, on demand. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** An app's DATABASE_URL and DATABASE_READ_URL for `database` of the pair, and the replica lag it accepts. */
  appEnv(database: string, maxLagMs: number): Record<string, string>;
  /** Creates `database` on the primary, migrated to the latest schema (the replica follows it). */
  createMigratedDatabase(database: string): Promise<void>;
  /** Until the replica has replayed everything the primary committed so far (in `database`). */
  caughtUp(database: string): Promise<void>;
  stopReplica(): void;
  destroy(): void;
}

/**
 * A primary and a streaming replica of the test's own, from the system's PostgreSQL binaries on free ports:
 * `initdb` (trust, replication allowed on loopback), then `pg_basebackup -R` from the running primary, so the
 * replica follows it by streaming replication. PostgreSQL refuses to run as root, so as root every step runs as
 * the postgres user (`runuser`). fsync is off: the data dies with the test.
 */
export async function startReplicaPair(): Promise<OwnReplicaPair> {
  const bin = binDir();
  const dir = mkdtempSync(path.join(tmpdir(), 'hd-replica-'));
  chmodSync(dir, 0o777);
  const asRoot = process.getuid?.() === 0;
  const run = (cmd: string, args: string[]) => {
    const full = asRoot ? ['runuser', ['-u', 'postgres', '--', path.join(bin, cmd), ...args]] : [path.join(bin, cmd), args];
    const r = spawnSync(full[0] as string, full[1] as string[], { encoding: 'utf8', timeout: 120_000 });
    if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stdout}${r.stderr}`);
  };
  const primary = path.join(dir, 'primary');
  const replica = path.join(dir, 'replica');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const conf = (data: string, port: number) =>
    appendFileSync(
      path.join(data, 'postgresql.conf'),
      `\nport = ${port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '${dir}'\nwal_level = replica\nmax_wal_senders = 5\nhot_standby = on\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\nshared_buffers = 32MB\n`,
    );
  const stop = (data: string) => {
    if (existsSync(path.join(data, 'postmaster.pid'))) {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        /* already down */
      }
    }
  };
  try {
    run('initdb', ['-D', primary, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
    conf(primary, primaryPort);
    run('pg_ctl', ['-D', primary, '-l', path.join(dir, 'primary.log'), '-w', 'start']);
    run('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', replica, '-R', '-X', 'stream', '--no-sync']);
    // The copied configuration names the primary's port: the replica listens on its own.
    appendFileSync(path.join(replica, 'postgresql.conf'), `\nport = ${replicaPort}\n`);
    run('pg_ctl', ['-D', replica, '-l', path.join(dir, 'replica.log'), '-w', 'start']);
  } catch (err) {
    stop(replica);
    stop(primary);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = (port: number, database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const onReplica = async (statement: string) => {
    const c = new Client({ connectionString: url(replicaPort, 'postgres') });
    await c.connect();
    try {
      await c.query(statement);
    } finally {
      await c.end();
    }
  };
  return {
    primaryUrl: (db) => url(primaryPort, db),
    replicaUrl: (db) => url(replicaPort, db),
    pauseReplay: () => onReplica('SELECT pg_wal_replay_pause()'),
    resumeReplay: () => onReplica('SELECT pg_wal_replay_resume()'),
    appEnv: (database, maxLagMs) => ({ DATABASE_URL: url(primaryPort, database), DATABASE_READ_URL: url(replicaPort, database), DATABASE_READ_MAX_LAG_MS: String(maxLagMs) }),
    createMigratedDatabase: (database) => migratedDatabase(url(primaryPort, database)),
    async caughtUp(database) {
      const p = new Client({ connectionString: url(primaryPort, database) });
      const r = new Client({ connectionString: url(replicaPort, database) });
      await Promise.all([p.connect(), r.connect()]);
      try {
        const lsn = (await p.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
        await eventually(async () => ((await r.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [lsn])).rows[0]!.ok ? true : undefined), 10_000, 'the replica to replay');
      } finally {
        await Promise.all([p.end(), r.end()]);
      }
    },
    stopReplica: () => stop(replica),
    destroy() {
      stop(replica);
      stop(primary);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
