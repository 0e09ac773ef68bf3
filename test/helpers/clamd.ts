import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { clamdScanner } from '../../src/domains/files/scan';
import { freePort } from './ports';
import { sleep } from './wait';

/**
 * A real clamd of the test's own (Debian's clamav-daemon package; scripts/lib.sh installs it): in the
 * foreground, on a free loopback TCP port, with no local socket, and with a signature database written here
 * that recognises the EICAR test file. No signatures are downloaded (no freshclam: the mirrors are not
 * reachable here), so this database is all it knows.
 */

/** Where Debian's clamav-daemon puts clamd, or null when it is not installed. */
export const CLAMD = ['/usr/sbin/clamd', '/usr/bin/clamd'].find((p) => existsSync(p)) ?? null;

/** The 68-byte EICAR anti-virus test file (https://www.eicar.org): harmless, and flagged by every scanner. */
export const EICAR = Buffer.from('X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*', 'latin1');

/** The name our database gives it; clamd reports signatures of unofficial databases with `.UNOFFICIAL` appended. */
export const EICAR_SIGNATURE_NAME = 'Helpdesk.Test.EICAR';
export const EICAR_SIGNATURE = `${EICAR_SIGNATURE_NAME}.UNOFFICIAL`;

/** The shared daemon's StreamMaxLength: above the 5 MiB a test streams, and small enough to exceed cheaply. */
export const CLAMD_STREAM_MAX_BYTES = 8 * 1024 * 1024;

export interface OwnClamd {
  host: string;
  port: number;
  streamMaxBytes: number;
  /** What clamd logged so far (for a failing test's message). */
  log(): string;
  stop(): Promise<void>;
  /** SIGKILL at once and remove the files, synchronously (for a process's exit handler). */
  killNow(): void;
}

/**
 * Starts a clamd and resolves once it answers PING (loading even this one-signature database takes it a
 * moment, more on a busy machine). `streamMaxBytes` is its StreamMaxLength.
 */
export async function startClamd(opts: { streamMaxBytes?: number; startTimeoutMs?: number } = {}): Promise<OwnClamd> {
  if (!CLAMD) throw new Error("clamd is not installed (scripts/lib.sh installs Debian's clamav-daemon)");
  const streamMaxBytes = opts.streamMaxBytes ?? CLAMD_STREAM_MAX_BYTES;
  const dir = mkdtempSync(path.join(tmpdir(), 'hd-clamd-'));
  const db = path.join(dir, 'db');
  mkdirSync(db);
  // An .ndb body signature (name:target:offset:hex): target 0 is any file, offset * anywhere in it, so EICAR
  // is found with bytes around it too (an email part's trailing newline, inside an archive clamd unpacks).
  writeFileSync(path.join(db, 'helpdesk-test.ndb'), `${EICAR_SIGNATURE_NAME}:0:*:${EICAR.toString('hex')}\n`);
  const logFile = path.join(dir, 'clamd.log');
  let last: Error | undefined;
  // A free port may be taken between freePort() and clamd's bind: then clamd exits, and it is tried again.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const conf = path.join(dir, 'clamd.conf');
    writeFileSync(
      conf,
      [
        'Foreground yes',
        // No LocalSocket line: no unix socket. TCP on loopback only.
        `TCPSocket ${port}`,
        'TCPAddr 127.0.0.1',
        `DatabaseDirectory ${db}`,
        `PidFile ${path.join(dir, 'clamd.pid')}`,
        `LogFile ${logFile}`,
        'LogTime yes',
        'LogVerbose yes',
        `TemporaryDirectory ${dir}`,
        'Bytecode no',
        'MaxThreads 4',
        `StreamMaxLength ${streamMaxBytes}`,
        // Larger than the stream limit, so a file under it is scanned whole rather than skipped as "too big".
        `MaxFileSize ${streamMaxBytes * 2}`,
        `MaxScanSize ${streamMaxBytes * 4}`,
        '',
      ].join('\n'),
    );
    let output = '';
    const proc: ChildProcess = spawn(CLAMD, ['--foreground', '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
    proc.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
    proc.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
    const log = () => output + (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
    const scanner = clamdScanner({ host: '127.0.0.1', port, timeoutMs: 1000 });
    const deadline = Date.now() + (opts.startTimeoutMs ?? 30_000);
    let answered = false;
    while (Date.now() < deadline && proc.exitCode === null && proc.signalCode === null) {
      if (await scanner.ping()) {
        answered = true;
        break;
      }
      await sleep(50);
    }
    const stop = async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        await new Promise<void>((resolve) => {
          const kill = setTimeout(() => proc.kill('SIGKILL'), 5000);
          proc.once('exit', () => (clearTimeout(kill), resolve()));
          proc.kill('SIGTERM');
        });
      }
    };
    if (answered) {
      return {
        host: '127.0.0.1',
        port,
        streamMaxBytes,
        log,
        async stop() {
          await stop();
          rmSync(dir, { recursive: true, force: true });
        },
        killNow() {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    await stop();
    last = new Error(`clamd did not answer PING on 127.0.0.1:${port} (exit ${proc.exitCode ?? proc.signalCode ?? 'none'}):\n${log().slice(-4000)}`);
    if (!/bind|address already in use/i.test(log())) break;
  }
  rmSync(dir, { recursive: true, force: true });
  throw last!;
}

let shared: Promise<OwnClamd> | undefined;

/**
 * The test file's clamd, started on first use and reused by every test of the file (jest runs each file in a
 * worker process of its own); `stopSharedClamd` in afterAll kills it, and so does the worker's exit.
 */
export function sharedClamd(): Promise<OwnClamd> {
  if (!shared) {
    shared = startClamd();
    shared.then(
      (daemon) => process.once('exit', () => daemon.killNow()),
      () => {},
    );
  }
  return shared;
}

export async function stopSharedClamd(): Promise<void> {
  const daemon = await shared?.catch(() => undefined);
  shared = undefined;
  await daemon?.stop();
}
