import type { Response } from 'express';
import type { HandlerResult } from '../operation';

/**
 * An event stream's answer: headers first, then whatever the handler's stream writes, until it ends or the client
 * goes. A client that stopped reading is cut off rather than left holding its unsent frames and its socket.
 */
export async function sendStream(res: Response, stream: NonNullable<HandlerResult['stream']>, log: { warn(o: object, msg: string): void }): Promise<void> {
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  // No cache or proxy may hold events back (X-Accel-Buffering: nginx's buffering of upstream answers).
  res.setHeader('Cache-Control', 'no-cache, no-transform');
  res.setHeader('X-Accel-Buffering', 'no');
  // The stream ends only with its connection, so its body is delimited by the close (RFC 9112 §6.3), not
  // chunked: each write then goes to the socket as it is, where chunk framing made Node copy every
  // write into a buffer of its own per socket (hundreds of streams writing the same page each held a copy).
  res.useChunkedEncodingByDefault = false;
  res.shouldKeepAlive = false;
  res.flushHeaders();
  const gone = new AbortController();
  res.once('close', () => gone.abort());
  const write = (chunk: string | Buffer) => !gone.signal.aborted && res.write(chunk) && !res.writableNeedDrain;
  const drained = (ms: number) =>
    new Promise<boolean>((resolve) => {
      if (gone.signal.aborted) return resolve(false);
      if (!res.writableNeedDrain) return resolve(true);
      const done = (ok: boolean) => () => {
        clearTimeout(timer);
        res.off('drain', onDrain);
        res.off('close', onClose);
        resolve(ok && !gone.signal.aborted);
      };
      const onDrain = done(true);
      const onClose = done(false);
      const timer = setTimeout(done(false), ms);
      res.once('drain', onDrain).once('close', onClose);
    });
  try {
    await stream({ write, drained, signal: gone.signal });
  } catch (err) {
    // The headers are sent: a stream that fails ends, and the client resumes with Last-Event-ID.
    log.warn({ err_code: 'stream_failed', cause: (err as Error)?.message }, 'event stream ended by an error');
  } finally {
    // A client that stopped reading would keep its unsent frames (and its socket) here for as long as it
    // likes: it is cut off instead. It lost no event: it resumes after the last whole one it read.
    if (res.writableNeedDrain) res.destroy();
    else res.end();
  }
}
