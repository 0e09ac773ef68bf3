import { connect } from 'node:net';
import type { Readable } from 'node:stream';
import type { ConfigSection } from '../../config';
import type { Scanner } from './types';

/**
 * Virus scanning through clamd (issue 34), optional: `CLAMAV_HOST` names a clamd listening on TCP
 * (`TCPSocket`), `CLAMAV_PORT` its port. The file is streamed with clamd's INSTREAM command, as it is read
 * and never whole in memory:
 *
 *   zINSTREAM\0  then  <4-byte big-endian length><bytes>  …  then  <0 0 0 0>
 *
 * and clamd answers one NUL-terminated line: `stream: OK`, `stream: <signature> FOUND`, or `<message> ERROR`.
 *
 * Only `stream: OK` is clean. Anything else that is not a FOUND is an `error`, which the caller must not
 * take as clean: clamd's own errors, a connection refused or reset, no answer within `CLAMAV_TIMEOUT_MS`,
 * the file's stream failing, and a file larger than clamd's `StreamMaxLength` (clamd answers
 * `INSTREAM size limit exceeded. ERROR` and closes the connection, usually resetting it before that answer
 * can be read, since the rest of the file is still arriving; either way the result is an `error` that says so).
 */

export type ScanResult = Awaited<ReturnType<Scanner['scan']>>;

export interface ClamdOptions {
  host: string;
  port: number;
  /** The whole scan's deadline: connecting, streaming the file and clamd's answer. */
  timeoutMs: number;
}

/** A scanner with clamd's liveness check beside it (for readiness probes and tests). */
export interface ClamdScanner extends Scanner {
  /** True when clamd answers PING with PONG within the timeout. */
  ping(): Promise<boolean>;
}

/** The most bytes one INSTREAM chunk carries: a source chunk larger than this is sent as several. */
const FRAME_BYTES = 64 * 1024;
/** clamd's answers are one short line; anything longer is not clamd. */
const MAX_ANSWER_BYTES = 4096;

/** The configured scanner, or undefined when CLAMAV_HOST is unset (scanning off). */
export function scannerFromConfig(config: ConfigSection<'scanning'>): ClamdScanner | undefined {
  if (!config.CLAMAV_HOST) return undefined;
  return clamdScanner({ host: config.CLAMAV_HOST, port: config.CLAMAV_PORT, timeoutMs: config.CLAMAV_TIMEOUT_MS });
}

export function clamdScanner(opts: ClamdOptions): ClamdScanner {
  return {
    scan: (body) => instream(opts, body),
    ping: async () => (await clamdCommand(opts, 'PING').catch(() => '')) === 'PONG',
  };
}

/** One clamd answer, as the scan's result. */
export function parseClamdAnswer(answer: string): ScanResult {
  const nul = answer.indexOf('\0');
  const text = (nul < 0 ? answer : answer.slice(0, nul)).trim();
  if (text === 'stream: OK') return { clean: true };
  const prefix = 'stream: ';
  const found = ' FOUND';
  if (text.startsWith(prefix) && text.endsWith(found) && text.length > prefix.length + found.length) {
    return { clean: false, signature: text.slice(prefix.length, -found.length) };
  }
  return { error: `clamd answered: ${text === '' ? '(nothing)' : text.slice(0, 300)}` };
}

/** A one-word clamd command (PING, VERSION) and its answer, without the terminating NUL. */
export function clamdCommand(opts: ClamdOptions, name: 'PING' | 'VERSION'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: opts.host, port: opts.port });
    let answer = '';
    const timer = setTimeout(() => socket.destroy(new Error(`clamd did not answer ${name} within ${opts.timeoutMs} ms`)), opts.timeoutMs);
    socket.setEncoding('latin1');
    socket.on('connect', () => socket.write(`z${name}\0`));
    socket.on('data', (chunk: string) => {
      answer += chunk;
      if (answer.includes('\0') || answer.length > MAX_ANSWER_BYTES) socket.end();
    });
    socket.on('error', (err) => (clearTimeout(timer), reject(err)));
    socket.on('close', () => {
      clearTimeout(timer);
      const nul = answer.indexOf('\0');
      resolve((nul < 0 ? answer : answer.slice(0, nul)).trim());
    });
  });
}

function instream(opts: ClamdOptions, body: Readable): Promise<ScanResult> {
  return new Promise<ScanResult>((resolve) => {
    const where = `clamd at ${opts.host}:${opts.port}`;
    const socket = connect({ host: opts.host, port: opts.port });
    let settled = false;
    let sent = 0;
    let fileSent = false;
    let answer = '';
    const finish = (result: ScanResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      // The caller handed the stream over: when the scan stops before its end, release what it holds.
      if (!body.readableEnded) body.destroy();
      resolve(result);
    };
    const timer = setTimeout(
      () => finish({ error: `${where} did not answer within ${opts.timeoutMs} ms (${sent} bytes sent${fileSent ? ', the whole file' : ''})` }),
      opts.timeoutMs,
    );
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      answer += chunk;
      // clamd answers before the end of the stream only to refuse it (the size limit): stop sending then.
      if (answer.includes('\0') || answer.length > MAX_ANSWER_BYTES) finish(parseClamdAnswer(answer));
    });
    socket.on('end', () => finish(answer !== '' ? parseClamdAnswer(answer) : { error: hungUp(where, sent, fileSent) }));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (answer !== '') return finish(parseClamdAnswer(answer));
      const midStream = err.code === 'EPIPE' || err.code === 'ECONNRESET';
      finish({ error: midStream ? hungUp(where, sent, fileSent) : `${where}: ${err.message}` });
    });
    socket.on('close', () => finish({ error: hungUp(where, sent, fileSent) }));
    socket.once('connect', () => {
      send().catch((err: Error) => finish({ error: `reading the file to scan failed: ${err.message}` }));
    });

    /** Resolves when the socket takes more (or is gone: then `settled` is, or is about to be, true). */
    const drained = () =>
      new Promise<void>((go) => {
        const done = () => (socket.off('drain', done), socket.off('close', done), go());
        socket.on('drain', done);
        socket.on('close', done);
      });

    async function send(): Promise<void> {
      socket.write('zINSTREAM\0');
      for await (const chunk of body) {
        if (settled) return;
        const bytes: Buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        // A zero-length chunk would end the stream early (it is INSTREAM's terminator): skip it.
        for (let at = 0; at < bytes.length; at += FRAME_BYTES) {
          const frame = bytes.subarray(at, at + FRAME_BYTES);
          const length = Buffer.allocUnsafe(4);
          length.writeUInt32BE(frame.length, 0);
          socket.write(length);
          const more = socket.write(frame);
          sent += frame.length;
          if (!more) await drained();
          if (settled) return;
        }
      }
      if (settled) return;
      fileSent = true;
      socket.write(Buffer.alloc(4));
    }
  });
}

function hungUp(where: string, sent: number, fileSent: boolean): string {
  return fileSent
    ? `${where} closed the connection without an answer`
    : `${where} closed the connection after ${sent} bytes of the file, before its end (larger than clamd's StreamMaxLength?)`;
}
