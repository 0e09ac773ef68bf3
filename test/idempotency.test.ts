/**
 * Safe retries with Idempotency-Key (issue 18, part 1; IETF httpapi Idempotency-Key draft): on every
 * authenticated POST and PATCH, the first request with a key runs and its answer is kept; a repeat replays
 * it (Idempotent-Replayed: true) without running again; another body under the key is 422, a repeat while
 * the first runs is 409, an overlong key 400. Under concurrency, across API processes, and after expiry.
 */
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { sql } from 'kysely';
import { startTestApp } from './helpers/context';
import { inlineShared } from './helpers/openapi-doc';
import { bearer, createWorkspace, mintKey } from './helpers/factories';
import { killGroup, spawnApi, type ApiProcess } from './helpers/processes';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

const ticketBody = (subject: string) => ({ subject, description: 'The printer is on fire.', customer_email: 'idem@example.test' });
const postTicket = (key: string | undefined, body: Record<string, unknown>, token = ws.ownerKey) => {
  const r = ctx.http.post('/v1/tickets').set(bearer(token));
  return (key === undefined ? r : r.set('Idempotency-Key', key)).send(body);
};
const ticketsWithSubject = async (subject: string) =>
  Number((await sql<{ n: number }>`select count(*)::int as n from tickets where tenant_id = ${ws.tenantId} and subject = ${subject}`.execute(ctx.db)).rows[0]!.n);

describe('a repeated request with the same key', () => {
  test('replays the first answer (status, body, Idempotent-Replayed: true) and creates one ticket', async () => {
    const key = randomUUID();
    const subject = `Replay ${key}`;
    const first = await postTicket(key, ticketBody(subject));
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await postTicket(key, ticketBody(subject));
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await ticketsWithSubject(subject)).toBe(1);
  });

  test('the same body written differently (key order, spacing) is the same request', async () => {
    const key = randomUUID();
    const subject = `Reordered ${key}`;
    await postTicket(key, ticketBody(subject)).expect(201);
    const reordered = await ctx.http
      .post('/v1/tickets')
      .set({ ...bearer(ws.ownerKey), 'Idempotency-Key': key, 'Content-Type': 'application/json' })
      .send(`{ "customer_email": "idem@example.test",  "description": "The printer is on fire.", "subject": ${JSON.stringify(subject)} }`);
    expect(reordered.status).toBe(201);
    expect(reordered.headers['idempotent-replayed']).toBe('true');
    expect(await ticketsWithSubject(subject)).toBe(1);
  });

  test('a retried reply is written once (an email reply is sent once)', async () => {
    const t = (await createTicket(ctx, ws)) as { id: string };
    const key = randomUUID();
    const reply = () => ctx.http.post(`/v1/tickets/${t.id}/replies`).set({ ...bearer(ws.ownerKey), 'Idempotency-Key': key }).send({ body: 'On our way.' });
    const [a, b] = [await reply(), await reply()];
    expect(b.status).toBe(a.status);
    expect(b.body).toEqual(a.body);
    expect(b.headers['idempotent-replayed']).toBe('true');
    const replies = await sql<{ n: number }>`select count(*)::int as n from ticket_events where ticket_id = ${t.id} and kind = 'reply'`.execute(ctx.db);
    expect(replies.rows[0]!.n).toBe(1);
  });

  test('PATCH too: a replayed change is not applied twice (one fields_changed event)', async () => {
    const t = (await createTicket(ctx, ws)) as { id: string };
    const key = randomUUID();
    const patch = () => ctx.http.patch(`/v1/tickets/${t.id}`).set({ ...bearer(ws.ownerKey), 'Idempotency-Key': key }).send({ tags: ['vip'] });
    expect((await patch()).status).toBe(200);
    // Changed meanwhile by someone else: the replay must not undo it.
    await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ tags: ['other'] }).expect(200);
    const replay = await patch();
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.tags).toEqual(['vip']);
    const now = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey));
    expect(now.body.tags).toEqual(['other']);
  });
});

describe('refusals', () => {
  test('the same key with a different body → 422 idempotency_key_reused, nothing written', async () => {
    const key = randomUUID();
    await postTicket(key, ticketBody(`First ${key}`)).expect(201);
    const other = await postTicket(key, ticketBody(`Second ${key}`));
    expect(other.status).toBe(422);
    expect(other.body.code).toBe('idempotency_key_reused');
    expect(await ticketsWithSubject(`Second ${key}`)).toBe(0);
  });

  test('a repeat while the first is still running → 409 idempotency_key_in_use', async () => {
    const key = randomUUID();
    const body = ticketBody(`Running ${key}`);
    const fingerprint = ctx.services.idempotency.fingerprint('POST', '/v1/tickets', body);
    // The first request holds the key (as it does while its handler runs).
    const principal = await ctx.services.identity.authenticate(`Bearer ${ws.ownerKey}`);
    expect(await ctx.services.idempotency.start(principal, key, fingerprint)).toEqual({ run: true });
    const res = await postTicket(key, body);
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('idempotency_key_in_use');
    expect(await ticketsWithSubject(`Running ${key}`)).toBe(0);
  });

  test('a key longer than 255 characters (or empty, or not printable ASCII) → 400, nothing written', async () => {
    for (const key of ['k'.repeat(256), 'clé-été']) {
      const subject = `Bad key ${randomUUID()}`;
      const res = await postTicket(key, ticketBody(subject));
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('idempotency_key_invalid');
      expect(await ticketsWithSubject(subject)).toBe(0);
    }
    expect((await postTicket('k'.repeat(255), ticketBody(`Max key ${randomUUID()}`))).status).toBe(201);
  });

  test('a request answered with an error keeps nothing: the retry runs again (not replayed)', async () => {
    const key = randomUUID();
    const body = { ...ticketBody(`Refused ${key}`), customer_email: undefined, customer_id: randomUUID() };
    const first = await postTicket(key, body);
    expect(first.status).toBe(422);
    const again = await postTicket(key, body);
    expect(again.status).toBe(422);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
  });

  test('keys are per caller: another API key of the workspace using the same key runs its own request', async () => {
    const other = (await mintKey(ctx, ws.ownerKey, { scopes: ['*'] })).secret;
    const key = randomUUID();
    await postTicket(key, ticketBody(`Mine ${key}`)).expect(201);
    const theirs = await postTicket(key, ticketBody(`Theirs ${key}`), other);
    expect(theirs.status).toBe(201);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
  });
});

test('20 parallel identical requests make one ticket; the others replay it or are told it is in use', async () => {
  const key = randomUUID();
  const subject = `Parallel ${key}`;
  const answers = await Promise.all(Array.from({ length: 20 }, () => postTicket(key, ticketBody(subject))));
  expect(await ticketsWithSubject(subject)).toBe(1);
  const created = answers.filter((a) => a.status === 201);
  expect(created.length).toBeGreaterThanOrEqual(1);
  expect(new Set(created.map((a) => a.body.id)).size).toBe(1);
  for (const a of answers) expect(a.status === 201 || (a.status === 409 && a.body.code === 'idempotency_key_in_use')).toBe(true);
});

describe('across API processes and after expiry', () => {
  const apis: ApiProcess[] = [];
  afterAll(() => {
    for (const a of apis) killGroup(a.proc);
  });

  test('the same key sent to two API processes at once makes one ticket', async () => {
    apis.push(await spawnApi(ctx.config), await spawnApi(ctx.config));
    const key = randomUUID();
    const subject = `Two processes ${key}`;
    const send = (url: string) =>
      new Promise<number>((resolve, reject) => {
        const body = JSON.stringify(ticketBody(subject));
        const req = request(`${url}/v1/tickets`, { method: 'POST', headers: { ...bearer(ws.ownerKey), 'Content-Type': 'application/json', 'Idempotency-Key': key } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        });
        req.on('error', reject);
        req.end(body);
      });
    const statuses = await Promise.all(apis.flatMap((a) => Array.from({ length: 5 }, () => send(a.url))));
    expect(statuses.every((s) => s === 201 || s === 409)).toBe(true);
    expect(await ticketsWithSubject(subject)).toBe(1);
  });

  test('after IDEMPOTENCY_TTL_SECONDS the key is free again: the repeat runs as a new request', async () => {
    const short = await startTestApp({ env: { IDEMPOTENCY_TTL_SECONDS: '1' } });
    try {
      const w = await createWorkspace(short);
      const key = randomUUID();
      const body = ticketBody(`Expiring ${key}`);
      const post = () => short.http.post('/v1/tickets').set({ ...bearer(w.ownerKey), 'Idempotency-Key': key }).send(body);
      const first = await post();
      await new Promise((r) => setTimeout(r, 1200));
      const later = await post();
      expect(later.status).toBe(201);
      expect(later.headers['idempotent-replayed']).toBeUndefined();
      expect(later.body.id).not.toBe(first.body.id);
      // The hourly prune removes what has expired.
      expect(await short.workerServices.idempotency.pruneExpired()).toBeGreaterThanOrEqual(0);
    } finally {
      await short.close();
    }
  });
});

test('the OpenAPI document offers Idempotency-Key on authenticated POST and PATCH, with its answers', async () => {
  const doc = inlineShared((await ctx.http.get('/v1/openapi.json')).body) as { paths: Record<string, Record<string, { parameters: { name: string; in: string }[]; responses: Record<string, { description: string; headers?: Record<string, unknown> }> }>> };
  const create = doc.paths['/v1/tickets']!.post!;
  expect(create.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'Idempotency-Key', in: 'header' })]));
  expect(create.responses['201']!.headers).toHaveProperty('Idempotent-Replayed');
  expect(create.responses['409']!.description).toContain('idempotency_key_in_use');
  expect(create.responses['422']!.description).toContain('idempotency_key_reused');
  // Reads and public intake take none.
  expect(doc.paths['/v1/tickets']!.get!.parameters.some((p) => p.name === 'Idempotency-Key')).toBe(false);
  expect(doc.paths['/v1/ingest/{channel}']!.post!.parameters.some((p) => p.name === 'Idempotency-Key')).toBe(false);
});
