/** A raw Server-Sent Events client for GET /v1/events/stream (or another stream, by `path`): every block parsed as it arrives. */
import { request, type IncomingMessage } from 'node:http';
import { bearer } from './factories';

export interface Sse {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

export interface SseClient {
  /** The blocks that carried an event (`id:`), in arrival order. */
  events(): Sse[];
  /** Every block, in arrival order (those without an id too, such as a stream's last word before it ends). */
  blocks(): Sse[];
  heartbeats(): number;
  status(): number;
  contentType(): string;
  /** The response ended, closed or failed (the server went away, or close() was called). */
  ended(): boolean;
  /** Starts reading a stream opened with `paused` (a client that stopped reading, until now). */
  resume(): void;
  /** The answer's headers (a refusal's Retry-After, say). */
  headers(): Record<string, string | string[] | undefined>;
  /** The whole text received (a refusal's problem body). */
  text(): string;
  close(): void;
}

/**
 * Opens the stream on `baseUrl` (e.g. http://127.0.0.1:1234). Only complete blocks (ended by a blank line)
 * are recorded, so a connection cut mid-block records nothing of that block, as EventSource would.
 */
export function connectSse(baseUrl: string, token: string | null, opts: { query?: string; lastEventId?: string; paused?: boolean; path?: string; headers?: Record<string, string> } = {}): SseClient {
  const { hostname, port } = new URL(baseUrl);
  const blocks: Sse[] = [];
  let status = 0;
  let contentType = '';
  let ended = false;
  let buffer = '';
  let text = '';
  let response: IncomingMessage | undefined;
  const req = request({
    host: hostname,
    port,
    path: `${opts.path ?? '/v1/events/stream'}${opts.query ?? ''}`,
    // Another stream (web chat's) by `path`; a null token sends no Authorization (a token in the query instead).
    headers: { Accept: 'text/event-stream', ...(token !== null ? bearer(token) : {}), ...(opts.lastEventId ? { 'Last-Event-ID': opts.lastEventId } : {}), ...opts.headers },
  });
  req.on('response', (res: IncomingMessage) => {
    response = res;
    status = res.statusCode ?? 0;
    contentType = String(res.headers['content-type'] ?? '');
    res.setEncoding('utf8');
    if (opts.paused) res.pause();
    res.on('data', (chunk: string) => {
      if (status !== 200) text += chunk;
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block: Sse = {};
        for (const line of buffer.slice(0, end).split('\n')) {
          if (line.startsWith(':')) block.comment = line.slice(1).trim();
          else {
            const at = line.indexOf(': ');
            const field = line.slice(0, at) as 'id' | 'event' | 'data' | 'retry';
            if (field !== 'retry') block[field] = line.slice(at + 2);
          }
        }
        blocks.push(block);
        buffer = buffer.slice(end + 2);
      }
    });
    res.on('end', () => (ended = true));
    res.on('close', () => (ended = true));
    res.on('error', () => (ended = true));
  });
  req.on('error', () => (ended = true));
  req.end();
  return {
    events: () => blocks.filter((b) => b.id !== undefined),
    blocks: () => [...blocks],
    heartbeats: () => blocks.filter((b) => b.comment === 'heartbeat').length,
    status: () => status,
    contentType: () => contentType,
    ended: () => ended,
    resume: () => response?.resume(),
    headers: () => response?.headers ?? {},
    text: () => text,
    close: () => req.destroy(),
  };
}
