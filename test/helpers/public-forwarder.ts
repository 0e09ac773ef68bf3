import { createServer, request as httpRequest, type Server } from 'node:http';
import type { ProviderDoubles } from './provider-doubles';

/**
 * PUBLIC_BASE_URL must be known before the app starts, and the test app listens on an ephemeral port: a small
 * forwarder listens on a port chosen first and relays to the app, standing for the load balancer in front of it.
 */
export function startForwarder(port: number, target: () => number): Promise<Server> {
  const server = createServer((req, res) => {
    const up = httpRequest({ host: '127.0.0.1', port: target(), method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.headersSent || res.writeHead(502).end());
    req.pipe(up);
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

export async function stopForwarder(server: Server | undefined): Promise<void> {
  if (!server) return;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** The four providers' base URLs pointed at the doubles. */
export const doublesEnv = (d: ProviderDoubles) => ({
  POSTMARK_API_URL: d.urls.postmark,
  TWILIO_API_URL: d.urls.twilio,
  WHATSAPP_API_URL: d.urls.whatsapp,
  TELEGRAM_API_URL: d.urls.telegram,
});
