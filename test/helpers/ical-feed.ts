import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A holiday feed server (issue 37): a real HTTP server on 127.0.0.1 (port 0) serving iCalendar text at paths the
 * test names, the way public holiday calendars serve `.ics` files (`text/calendar`, 200). Each path answers what
 * `serve` set: a body, a status, a body sent in slow pieces or never finished (`hang`), or `size` bytes of filler
 * without a Content-Length (so a reader must count them as they come). Every request is recorded.
 */
export type FeedAnswer =
  | { body: string; status?: number; contentType?: string }
  | { hang: true }
  | { size: number };

export interface IcalFeed {
  url(path: string): string;
  serve(path: string, answer: FeedAnswer): void;
  requests: { path: string; headers: Record<string, string | string[] | undefined>; at: number }[];
  close(): Promise<void>;
}

export async function startIcalFeed(): Promise<IcalFeed> {
  const answers = new Map<string, FeedAnswer>();
  const requests: IcalFeed['requests'] = [];
  const hanging: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const path = req.url ?? '/';
    requests.push({ path, headers: req.headers, at: Date.now() });
    const answer = answers.get(path);
    if (!answer) return void res.writeHead(404, { 'content-type': 'text/plain' }).end('no such calendar');
    if ('hang' in answer) {
      // Headers and a first line, then nothing: a reader must give up on its own clock.
      res.writeHead(200, { 'content-type': 'text/calendar' });
      res.write('BEGIN:VCALENDAR\r\n');
      hanging.push(res);
      return;
    }
    if ('size' in answer) {
      res.writeHead(200, { 'content-type': 'text/calendar' });
      const chunk = Buffer.alloc(64 * 1024, 'X');
      let sent = 0;
      const more = () => {
        while (sent < answer.size) {
          const n = Math.min(chunk.length, answer.size - sent);
          sent += n;
          if (!res.write(chunk.subarray(0, n))) return void res.once('drain', more);
        }
        res.end();
      };
      res.on('error', () => {});
      more();
      return;
    }
    res.writeHead(answer.status ?? 200, { 'content-type': answer.contentType ?? 'text/calendar; charset=utf-8' }).end(answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    serve: (path, answer) => void answers.set(path, answer),
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging.splice(0)) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** An iCalendar feed of VEVENTs, lines joined with CRLF as RFC 5545 writes them. */
export function icsFeed(events: string[][]): string {
  return ['BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:-//Helpdesk tests//Holidays//EN', 'CALSCALE:GREGORIAN', ...events.flatMap((e) => ['BEGIN:VEVENT', ...e, 'END:VEVENT']), 'END:VCALENDAR', ''].join('\r\n');
}
