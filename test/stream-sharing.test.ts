/**
 * What the streams of one API process share (issue 32): a page of the log read once for every stream of the
 * workspace at the same place, one credential re-check for every stream of the same credential, and a budget of
 * bytes written per turn of the event loop for all of them together (bench/streams.ts measures the effect).
 */
import type { AddressInfo } from 'node:net';
import { request } from 'node:http';
import type { KyselyPlugin } from 'kysely';
import { createEventService } from '../src/domains/events/service';
import type { StreamWriter } from '../src/http/result';
import { sseFeed } from '../src/http/sse';
import { createLogger } from '../src/lib/logger';
import { createWriteTurns } from '../src/domains/events/live';
import { createRechecks } from '../src/http/rechecks';
import type { Principal } from '../src/domains/identity/principal';
import { createWorkspace } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { eventually } from './helpers/wait';
import { useTestApp } from './helpers/use-test-app';

const turn = () => new Promise<void>((r) => setImmediate(r));

test('the write budget lets a turn of the event loop carry at most its bytes, and a lone large write through', async () => {
  const turns = createWriteTurns(128 * 1024);
  const order: string[] = [];
  let n = 0;
  const ticker = (async () => {
    for (let i = 0; i < 6; i += 1) {
      await turn();
      n += 1;
    }
  })();
  await Promise.all(['a', 'b', 'c', 'd'].map(async (who) => {
    await turns.take(100 * 1024);
    order.push(`${who}@${n}`);
  }));
  await ticker;
  // 100 KiB each, 128 KiB a turn: one writer per turn, in the order they asked.
  expect(order.map((o) => o[0])).toEqual(['a', 'b', 'c', 'd']);
  expect(new Set(order.map((o) => o.split('@')[1])).size).toBe(4);
  // Larger than a whole turn: still goes, alone.
  await expect(turns.take(1024 * 1024)).resolves.toBeUndefined();
});

test('streams of one credential share a re-check that started after the moment each needs; a later need starts a new one', async () => {
  let calls = 0;
  const principal = { tenantId: 't' } as Principal;
  const rechecks = createRechecks(async () => {
    calls += 1;
    await turn();
    return principal;
  });
  const t0 = performance.now() - 1;
  await Promise.all(Array.from({ length: 50 }, () => rechecks('Bearer sk_zr_a', t0)));
  expect(calls).toBe(1);
  await rechecks('Bearer sk_zr_b', t0);
  expect(calls).toBe(2);
  await rechecks('Bearer sk_zr_a', performance.now());
  expect(calls).toBe(3);
});

describe('against an API process', () => {
  const { ctx } = useTestApp({ env: { EVENT_STREAM_POLL_MS: '50', EVENT_STREAMS_PER_CALLER: '50' } });

  test('twenty streams of one workspace read each new page of the log once between them, and each gets every event', async () => {
    const w = await createWorkspace(ctx);
    // The events service on a database handle that counts the log's page reads (its statement starts `with page as`).
    let pageReads = 0;
    const counting: KyselyPlugin = {
      transformQuery(args) {
        const node = args.node as { kind: string; sqlFragments?: readonly string[] };
        if (node.kind === 'RawNode' && node.sqlFragments?.some((f) => f.includes('with page as'))) pageReads += 1;
        return args.node;
      },
      transformResult: async (args) => args.result,
    };
    const events = createEventService({ db: ctx.db.withPlugin(counting), config: { ...ctx.config, EVENT_STREAMS_PER_CALLER: 50 }, redis: ctx.runtime.redis, logger: createLogger(ctx.config, ctx.logs) });
    const authorization = `Bearer ${w.ownerKey}`;
    const principal = await ctx.services.identity.authenticate(authorization);
    const gone = new AbortController();
    const received: string[][] = [];
    const streams = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        received[i] = [];
        const run = await events.openStream(principal, { types: ['ticket.created'] }, undefined, () => ctx.services.identity.authenticate(authorization));
        const writer: StreamWriter = {
          write: (chunk) => {
            for (const m of String(chunk).matchAll(/^id: (.+)$/gm)) received[i]!.push(m[1]!);
            return true;
          },
          drained: async () => true,
          signal: gone.signal,
        };
        return { done: run(sseFeed(writer)) };
      }),
    );
    try {
      await new Promise((r) => setTimeout(r, 300));
      const before = pageReads;
      for (let i = 0; i < 3; i += 1) await createTicket(ctx, w);
      await eventually(async () => (received.every((r) => r.length === 3) ? true : undefined), 5000, 'every event on every stream');
      // Without sharing: at least one read per stream (20 or more) for the new events.
      expect(pageReads - before).toBeGreaterThan(0);
      expect(pageReads - before).toBeLessThanOrEqual(10);
      for (const r of received) expect(r).toEqual(received[0]);
    } finally {
      gone.abort();
      await Promise.all(streams.map((x) => x.done));
    }
  });

  test('a stream is delimited by its connection, not chunked: each page goes to the socket as written', async () => {
    const w = await createWorkspace(ctx);
    const headers = await new Promise<Record<string, string | string[] | undefined>>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: (ctx.server.address() as AddressInfo).port, path: '/v1/events/stream', headers: { authorization: `Bearer ${w.ownerKey}` } }, (res) => {
        resolve(res.headers);
        req.destroy();
      });
      req.on('error', reject);
      req.end();
    });
    expect(headers['transfer-encoding']).toBeUndefined();
    expect(headers['connection']).toBe('close');
    expect(headers['content-type']).toMatch(/^text\/event-stream/);
  });
});
