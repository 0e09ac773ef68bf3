import type { Feed, FeedBatch, FeedItem, FeedRun } from '../lib/feed';
import type { StreamWriter } from './result';

/*
 * Server-Sent Events framing (issue 35): the HTTP side of a live feed (src/lib/feed.ts). The event streams and
 * the web chat stream say what to send; this says how it looks on the wire. A route hands `sse(run)` to the
 * router as its `stream` answer (src/http/result.ts), which sends the headers and the bytes.
 */

/** The reconnection delay a client is told before anything else (EventSource's default is its own, often 3 s). */
const RECONNECT_MS = 2000;

/**
 * A batch's frames, encoded once per batch: the streams of one workspace send the same page of the log, so two
 * hundred of them write one buffer (a string would be encoded again per socket, and a write per frame costs each
 * socket a write request per event). Weak: the encoding lives as long as the batch its domain keeps.
 */
const encoded = new WeakMap<FeedBatch, Buffer>();

/** A line break inside a field would end it early: SSE carries multi-line data as one `data:` line per line. */
const LINE_BREAK = /\r\n|\r|\n/;

/** An item as one SSE frame: `id:` (when it has one: what Last-Event-ID hands back), `event:`, `data:`. */
export const frame = (item: FeedItem): string => {
  const data = LINE_BREAK.test(item.json) ? item.json.split(LINE_BREAK).join('\ndata: ') : item.json;
  return `${item.id !== undefined ? `id: ${item.id}\n` : ''}event: ${item.kind}\ndata: ${data}\n\n`;
};

const encode = (batch: FeedBatch): Buffer => {
  let bytes = encoded.get(batch);
  if (bytes === undefined) {
    bytes = Buffer.from(batch.items.map(frame).join(''));
    encoded.set(batch, bytes);
  }
  return bytes;
};

/** A feed whose items go to `w` as SSE frames. */
export function sseFeed(w: StreamWriter): Feed {
  return {
    send: (batch) => w.write(encode(batch)),
    size: (batch) => encode(batch).length,
    // A comment line: ignored by EventSource, but it keeps proxies from timing the connection out. An `id:` without
    // data moves the client's Last-Event-ID without dispatching an event.
    heartbeat: (resumeAfter) => w.write(resumeAfter === undefined ? ': heartbeat\n\n' : `id: ${resumeAfter}\n: heartbeat\n\n`),
    drained: (ms) => w.drained(ms),
    signal: w.signal,
  };
}

/** A feed's body as the router's `stream` answer: the reconnection delay first, then the feed's frames. */
export const sse =
  (run: FeedRun) =>
  async (w: StreamWriter): Promise<void> => {
    // A few bytes on a fresh connection: they never fill its buffer, and the feed's own writes watch backpressure.
    w.write(`retry: ${RECONNECT_MS}\n\n`);
    await run(sseFeed(w));
  };

/** Whether the request asks for a live stream (EventSource sends `Accept: text/event-stream`). */
export const wantsEventStream = (accept: string | undefined) => accept !== undefined && accept.toLowerCase().includes('text/event-stream');
