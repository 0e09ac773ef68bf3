import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { shuttingDown } from './errors';
import { sendProblem } from './problem';

/**
 * An HTTP server that stops gracefully: after drain() starts, it accepts no new connections, answers any
 * request that still arrives on an open connection with 503 shutting_down (Retry-After, Connection: close),
 * lets every request already in progress finish, and makes those last answers close their connections so
 * no client reuses a socket that is about to go away.
 */
export function createDrainableServer(app: RequestListener): { server: Server; drain(): Promise<void> } {
  const inFlight = new Set<ServerResponse>();
  let draining = false;

  const refuse = (res: ServerResponse) => {
    res.shouldKeepAlive = false;
    sendProblem(res, shuttingDown(), randomUUID());
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (draining) return refuse(res);
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
    app(req, res);
  });

  return {
    server,
    drain() {
      draining = true;
      for (const res of inFlight) if (!res.headersSent) res.shouldKeepAlive = false;
      // An event stream never finishes by itself: it is ended, and its client reconnects with Last-Event-ID
      // to another process (or this one restarted) without a gap.
      for (const res of inFlight) if (String(res.getHeader('content-type') ?? '').startsWith('text/event-stream')) res.end();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
