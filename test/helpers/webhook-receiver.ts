import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request as the receiver got it. */
export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  event: { id: string; type: string; occurred_at: string; tenant_id: string; data: Record<string, unknown> };
  at: number;
}

/** What the receiver answers to one request: a status, a status after a delay, or `hang` (never answers). */
export type Answer = number | 'hang' | { status: number; afterMs: number };

/**
 * A real webhook receiver on loopback (node:http on port 0): records every request and answers what
 * `respond` says. `stop()` closes it (connections refused from then on) and `start()` listens again on
 * the same port, for "receiver down for a while".
 */
export async function startReceiver(respond: (r: Received, count: number) => Answer = () => 200) {
  const received: Received[] = [];
  const hanging: ServerResponse[] = [];
  let server: Server | undefined;
  let port = 0;
  let answer = respond;
  let open = 0;
  let maxOpen = 0;

  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((req, res) => {
        open += 1;
        maxOpen = Math.max(maxOpen, open);
        res.on('close', () => (open -= 1));
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          const r: Received = { headers: req.headers, body, event: JSON.parse(body) as Received['event'], at: Date.now() };
          received.push(r);
          const a = answer(r, received.length);
          if (a === 'hang') {
            hanging.push(res);
            return;
          }
          if (typeof a === 'object') setTimeout(() => res.writeHead(a.status, { 'content-type': 'text/plain' }).end('ok'), a.afterMs);
          else res.writeHead(a, { 'content-type': 'text/plain' }).end('ok');
        });
      });
      server.listen(port, '127.0.0.1', () => {
        port = (server!.address() as AddressInfo).port;
        resolve();
      });
    });
  await listen();

  return {
    received,
    get url() {
      return `http://127.0.0.1:${port}/hooks`;
    },
    /** The most requests it ever held open at once. */
    get maxOpen() {
      return maxOpen;
    },
    answer(fn: (r: Received, count: number) => Answer) {
      answer = fn;
    },
    async stop() {
      for (const res of hanging.splice(0)) res.destroy();
      await new Promise<void>((resolve) => {
        server!.close(() => resolve());
        server!.closeAllConnections();
      });
    },
    start: listen,
  };
}

/** Verifies with the standardwebhooks package (throws when no signature verifies). */
export function verify(secret: string, r: Received): unknown {
  return new Webhook(secret).verify(r.body, {
    'webhook-id': String(r.headers['webhook-id']),
    'webhook-timestamp': String(r.headers['webhook-timestamp']),
    'webhook-signature': String(r.headers['webhook-signature']),
  });
}
