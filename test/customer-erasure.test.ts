/**
 * Erasure of a person and redaction of one message (issue 38). The person is seeded across every table, queue and
 * index they can reach; after the erasure a full-database text scan, a SCAN over the Redis prefix and the log lines
 * written since find none of their email, phone or name, while another person's data and every ticket's counts stay.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { addMember, bearer } from './helpers/factories';
import { emailPayload, whatsappPayload } from './helpers/payloads';
import { useTestApp } from './helpers/use-test-app';
import { createIntegration, delivery, recorded } from './helpers/webhook-intake';
import { frontEvent } from './helpers/webhooks';
import { eventually } from './helpers/wait';
import { blobStoreFromConfig } from '../src/domains/files/blobs';

const { ctx, ws } = useTestApp({ workers: true, workspaces: 1 });

const tag = () => randomBytes(4).toString('hex');
const digits = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 10)).join('');

interface Person {
  name: string;
  email: string;
  phone: string;
  wa: string;
}

const newPerson = (): Person => {
  const t = tag();
  const phone = `+49151${digits(8)}`;
  return { name: `Maya Fischer${t}`, email: `maya.${t}@fischer-logistik.test`, phone, wa: phone.slice(1) };
};

/** Every text the person can be found by, as the scans look for it (lower case: the scans ignore case). */
const needles = (p: Person) => [p.email, p.phone, p.wa, p.name].map((s) => s.toLowerCase());

/** Each table's rows (as text) that contain a needle, per needle: a scan of the whole database. */
async function databaseHits(needle: string): Promise<string[]> {
  const { rows: tables } = await sql<{ t: string }>`SELECT quote_ident(table_name) AS t FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`.execute(ctx.db);
  const hits: string[] = [];
  for (const { t } of tables) {
    const { rows } = await sql<{ row: string }>`SELECT x::text AS row FROM ${sql.raw(t)} x WHERE strpos(lower(x::text), ${needle}) > 0 LIMIT 3`.execute(ctx.db);
    for (const r of rows) hits.push(`${t}: ${r.row.slice(0, 300)}`);
  }
  return hits;
}

/** Every Redis key under the app's prefix whose value (of any type) contains the needle. */
async function redisHits(needle: string): Promise<string[]> {
  const redis = ctx.runtime.redis;
  const hits: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${ctx.config.REDIS_PREFIX}*`, 'COUNT', 500);
    cursor = next;
    for (const key of keys) {
      const type = await redis.type(key);
      let text = key;
      if (type === 'string') text += await redis.get(key);
      else if (type === 'hash') text += JSON.stringify(await redis.hgetall(key));
      else if (type === 'list') text += JSON.stringify(await redis.lrange(key, 0, -1));
      else if (type === 'set') text += JSON.stringify(await redis.smembers(key));
      else if (type === 'zset') text += JSON.stringify(await redis.zrange(key, 0, -1));
      else if (type === 'stream') text += JSON.stringify(await redis.xrange(key, '-', '+'));
      if (text.toLowerCase().includes(needle)) hits.push(`${type} ${key}`);
    }
  } while (cursor !== '0');
  return hits;
}

async function eraseAndWait(customerId: string, reason = 'GDPR art. 17 request #2291') {
  const res = await ctx.http.post(`/v1/customers/${customerId}/erase`).set(bearer(ws.ownerKey)).send({ reason });
  expect(res.status).toBe(202);
  expect(res.body).toMatchObject({ customer_id: customerId, state: expect.stringMatching(/queued|done/) });
  await eventually(
    async () => ((await ctx.http.get(`/v1/customers/${customerId}/erasures/${res.body.id}`).set(bearer(ws.ownerKey))).body.state === 'done' ? true : undefined),
    30_000,
    'the erasure to finish',
  );
  return res.body as { id: string };
}

beforeAll(async () => {
  await ctx.http.put('/v1/channels/email').set(bearer(ws.ownerKey)).send({ config: { inbound_address: 'support@acme.test' } }).expect(200);
  await ctx.http.put('/v1/channels/whatsapp').set(bearer(ws.ownerKey)).send({ config: {} }).expect(200);
});

describe('POST /v1/customers/{id}/erase', () => {
  test('leaves no row, Redis key or later log line holding the person, and keeps tickets, counts and another person', async () => {
    const p = newPerson();
    const bystander = newPerson();
    // An email ticket from the person, with a file, their name in the subject.
    const mail = await ctx.http.post('/v1/ingest/email').send({
      tenant_id: ws.tenantId,
      payload: emailPayload({
        from: p.email,
        fromName: p.name,
        subject: `Order for ${p.name} is late`,
        text: `Hello, this is ${p.name}, call me on ${p.phone}.`,
        attachments: [{ Name: `${p.name} passport.txt`, Content: Buffer.from(`passport of ${p.name}`).toString('base64'), ContentType: 'text/plain', ContentLength: 40 }],
      }),
    });
    expect(mail.status).toBe(200);
    const customerId = mail.body.customer_id as string;
    const ticketId = mail.body.ticket_id as string;
    // Their WhatsApp number and phone on the same customer, then a WhatsApp message.
    await ctx.http.patch(`/v1/customers/${customerId}`).set(bearer(ws.ownerKey)).send({ phone: p.phone, handles: [{ kind: 'whatsapp_id', handle: p.wa }] }).expect(200);
    const wa = await ctx.http.post('/v1/ingest/whatsapp').send({ tenant_id: ws.tenantId, payload: whatsappPayload({ from: p.wa, name: p.name, text: `It's ${p.name} again` }) });
    expect(wa.body.customer_id).toBe(customerId);
    // An agent's idempotent reply greeting them, and a note naming them.
    const reply = await ctx.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(ws.ownerKey)).set('Idempotency-Key', `r-${tag()}`).send({ body: `Hi ${p.name.split(' ')[0]}, we will email ${p.email}.` });
    expect(reply.status).toBeLessThan(300);
    await ctx.http.post(`/v1/tickets/${ticketId}/notes`).set(bearer(ws.ownerKey)).send({ body: `Customer ${p.name} (${p.phone}) is VIP` }).expect((r) => expect(r.status).toBeLessThan(300));
    // A webhook transcript from another helpdesk naming them.
    const front = await createIntegration(ctx, ws, 'front');
    await recorded(ctx, front, delivery(frontEvent({ recipient: p.email, subject: `Refund for ${p.name}` }) as unknown as Record<string, unknown>));
    // The bystander: a ticket and a transcript of their own, which must survive.
    const theirs = await ctx.http.post('/v1/ingest/email').send({ tenant_id: ws.tenantId, payload: emailPayload({ from: bystander.email, fromName: bystander.name, text: `I am ${bystander.name}` }) });
    // The person's WhatsApp ticket merged into the bystander's: the winner holds copies of the person's messages.
    expect(wa.body.ticket_id).not.toBe(ticketId);
    await ctx.http.post(`/v1/tickets/${wa.body.ticket_id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: theirs.body.ticket_id }).expect(200);
    // A job still queued naming the person (and the bystander in the same batch).
    const queue = ctx.runtime.queues.queue('ingest');
    const job = await queue.add(
      'ingest.batch',
      { reply_to: 'nobody', items: [{ id: 'a', tenant_id: ws.tenantId, channel: 'email', message: { text: `from ${p.email}` } }, { id: 'b', tenant_id: ws.tenantId, channel: 'email', message: { text: `from ${bystander.email}` } }] },
      { delay: 3_600_000 },
    );
    const lone = await queue.add('ingest.batch', { reply_to: 'nobody', items: [{ id: 'c', tenant_id: ws.tenantId, channel: 'email', message: { text: `only ${p.name}` } }] }, { delay: 3_600_000 });

    // Seeded where it should be, before: the scans find the person (the test can fail).
    for (const n of needles(p)) expect((await databaseHits(n)).length).toBeGreaterThan(0);
    expect(await redisHits(p.email.toLowerCase())).not.toEqual([]);
    const found = async () => ((await ctx.http.get(`/v1/tickets?q=${encodeURIComponent(`"${p.name}"`)}`).set(bearer(ws.ownerKey))).body.tickets as { id: string }[]).map((t) => t.id);
    expect(await found()).toContain(ticketId);
    const filesBefore = await ctx.db.selectFrom('attachments').select(['id', 'storage_key']).where('ticket_id', '=', ticketId).execute();
    expect(filesBefore.length).toBeGreaterThan(0);
    const countsBefore = await ctx.db.selectFrom('tickets').select(['id', 'status', 'created_at', 'first_responded_at', 'customer_id']).where('tenant_id', '=', ws.tenantId).orderBy('id').execute();
    const eventsBefore = await ctx.db.selectFrom('ticket_events').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', ws.tenantId).executeTakeFirstOrThrow();

    const logFrom = ctx.logs.lines.length;
    const erasure = await eraseAndWait(customerId);

    const leftovers: string[] = [];
    for (const n of needles(p)) leftovers.push(...(await databaseHits(n)).map((h) => `${n} in ${h}`));
    expect(leftovers).toEqual([]);
    for (const n of needles(p)) expect(await redisHits(n)).toEqual([]);
    expect(await found()).toEqual([]);
    const later = ctx.logs.lines.slice(logFrom).join('\n').toLowerCase();
    for (const n of needles(p)) expect(later.includes(n)).toBe(false);

    // The tickets stay with their counts and timings; only the text went.
    const countsAfter = await ctx.db.selectFrom('tickets').select(['id', 'status', 'created_at', 'first_responded_at', 'customer_id']).where('tenant_id', '=', ws.tenantId).orderBy('id').execute();
    expect(countsAfter).toEqual(countsBefore);
    const eventsAfter = await ctx.db.selectFrom('ticket_events').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', ws.tenantId).executeTakeFirstOrThrow();
    expect(eventsAfter.n).toBe(eventsBefore.n);
    const detail = await ctx.http.get(`/v1/tickets/${ticketId}`).set(bearer(ws.ownerKey));
    const mine = (detail.body.events as { actor_type: string; body: string }[]).filter((e) => e.actor_type === 'customer');
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((e) => e.body === '[erased]')).toBe(true);
    expect(detail.body.subject).toBe('Order for [erased] is late');
    // The customer keeps its id, empty; its files' bytes are gone from the store.
    const c = await ctx.http.get(`/v1/customers/${customerId}`).set(bearer(ws.ownerKey));
    expect(c.body).toMatchObject({ id: customerId, display_name: '[erased]', email: '', phone: '', handles: [], erased_at: expect.any(String) });
    expect(await ctx.db.selectFrom('attachments').select('id').where('id', 'in', filesBefore.map((f) => f.id)).execute()).toEqual([]);
    const blobs = blobStoreFromConfig(ctx.config);
    for (const f of filesBefore) expect(await blobs.get(f.storage_key)).toBeUndefined();
    // The queued job lost the person's item and kept the bystander's; a job only theirs is gone.
    const kept = await queue.getJob(job.id!);
    expect((kept!.data as { items: { id: string }[] }).items.map((i) => i.id)).toEqual(['b']);
    expect(await queue.getJob(lone.id!)).toBeUndefined();
    // The bystander is untouched.
    expect((await databaseHits(bystander.email.toLowerCase())).length).toBeGreaterThan(0);
    const theirTicket = await ctx.http.get(`/v1/tickets/${theirs.body.ticket_id}`).set(bearer(ws.ownerKey));
    expect(JSON.stringify(theirTicket.body)).toContain(bystander.name);
    // Announced without the data, and audited with who and why.
    const { rows: announced } = await sql<{ data: Record<string, unknown> }>`SELECT data FROM events WHERE tenant_id = ${ws.tenantId} AND type = 'customer.erased'`.execute(ctx.db);
    expect(announced.map((a) => Object.keys(a.data).sort())).toEqual([['erased_at', 'id']]);
    const audit = await ctx.db.selectFrom('audit_log').select(['action', 'details', 'actor_user_id']).where('tenant_id', '=', ws.tenantId).where('target_id', '=', customerId).execute();
    expect(audit.map((a) => a.action).sort()).toEqual(['customer.erase_requested', 'customer.erased']);
    expect(audit.find((a) => a.action === 'customer.erase_requested')!.details).toMatchObject({ erasure_id: erasure.id, reason: 'GDPR art. 17 request #2291' });
  });

  test('only an admin may erase (an editor gets 403 and nothing is queued); a second request joins the pending one', async () => {
    const p = newPerson();
    const created = await ctx.http.post('/v1/customers').set(bearer(ws.ownerKey)).send({ display_name: p.name, email: p.email }).expect(201);
    const editor = await addMember(ctx, ws, 'editor');
    const refused = await ctx.http.post(`/v1/customers/${created.body.id}/erase`).set(bearer(editor.token)).send({ reason: 'x' });
    expect(refused.status).toBe(403);
    expect(await ctx.db.selectFrom('customer_jobs').select('id').where('customer_id', '=', created.body.id).execute()).toEqual([]);
    const noReason = await ctx.http.post(`/v1/customers/${created.body.id}/erase`).set(bearer(ws.ownerKey)).send({});
    expect(noReason.status).toBe(400);
    const [one, two] = await Promise.all([0, 1].map(() => ctx.http.post(`/v1/customers/${created.body.id}/erase`).set(bearer(ws.ownerKey)).send({ reason: 'twice' })));
    expect(two!.body.id).toBe(one!.body.id);
    const done = await eraseAndWait(created.body.id);
    expect(done.id).toBe(one!.body.id);
    expect(await ctx.db.selectFrom('customer_jobs').select('id').where('customer_id', '=', created.body.id).execute()).toHaveLength(1);
    // Running the job again (a retry after it finished) changes nothing and fails nothing.
    await expect(ctx.workerServices.privacy.runErasure(ws.tenantId, done.id)).resolves.toEqual({ erased: false });
    // An erased customer cannot be changed or merged.
    expect((await ctx.http.patch(`/v1/customers/${created.body.id}`).set(bearer(ws.ownerKey)).send({ notes: 'x' })).body.code).toBe('customer_erased');
  });

  test('a new message from an erased address is a new person: it does not thread to the erased customer', async () => {
    const p = newPerson();
    const first = await ctx.http.post('/v1/ingest/whatsapp').send({ tenant_id: ws.tenantId, payload: whatsappPayload({ from: p.wa, name: p.name, text: 'hi' }) });
    await eraseAndWait(first.body.customer_id);
    const again = await ctx.http.post('/v1/ingest/whatsapp').send({ tenant_id: ws.tenantId, payload: whatsappPayload({ from: p.wa, name: p.name, text: 'hi again' }) });
    expect(again.status).toBe(200);
    expect(again.body.customer_id).not.toBe(first.body.customer_id);
  });
});

test('two runs of one erasure at once over 150 tickets (two workers, a retry) erase every ticket and announce it once', async () => {
  const p = newPerson();
  const c = await ctx.http.post('/v1/customers').set(bearer(ws.ownerKey)).send({ display_name: p.name, email: p.email }).expect(201);
  for (let i = 0; i < 150; i += 1) {
    await ctx.http.post('/v1/tickets').set(bearer(ws.ownerKey)).send({ subject: `Ticket ${i} of ${p.name}`, description: `from ${p.email}`, customer_id: c.body.id }).expect(201);
  }
  // The job row without its queued job: the two runs below are the only ones.
  const job = await ctx.db
    .insertInto('customer_jobs')
    .values({ tenant_id: ws.tenantId, id: crypto.randomUUID(), customer_id: c.body.id, kind: 'erase', reason: 'test', requested_by_user_id: null, requested_by_api_key_id: null })
    .returning('id')
    .executeTakeFirstOrThrow();
  const runs = await Promise.all([0, 1].map(() => ctx.workerServices.privacy.runErasure(ws.tenantId, job.id)));
  expect(runs.map((r) => r.erased).sort()).toEqual([false, true]);
  const subjects = await ctx.db.selectFrom('tickets').select('subject').where('customer_id', '=', c.body.id).execute();
  expect(subjects).toHaveLength(150);
  expect(subjects.every((t) => t.subject.endsWith('of [erased]'))).toBe(true);
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM events WHERE tenant_id = ${ws.tenantId} AND type = 'customer.erased' AND data->>'id' = ${c.body.id}`.execute(ctx.db);
  expect(rows[0]!.n).toBe(1);
  for (const n of needles(p)) expect(await databaseHits(n)).toEqual([]);
});

test('an erasure whose job never reached Redis is queued again by the sweep and done', async () => {
  const p = newPerson();
  const c = await ctx.http.post('/v1/customers').set(bearer(ws.ownerKey)).send({ display_name: p.name, email: p.email }).expect(201);
  // The request's row, committed, with no job behind it (Redis away at that moment), asked for 20 minutes ago.
  const job = await ctx.db
    .insertInto('customer_jobs')
    .values({ tenant_id: ws.tenantId, id: crypto.randomUUID(), customer_id: c.body.id, kind: 'erase', reason: 'lost job', requested_by_user_id: null, requested_by_api_key_id: null, created_at: new Date(Date.now() - 20 * 60_000) })
    .returning('id')
    .executeTakeFirstOrThrow();
  await expect(ctx.workerServices.privacy.requeueStale()).resolves.toEqual({ requeued: 1 });
  await eventually(
    async () => ((await ctx.http.get(`/v1/customers/${c.body.id}/erasures/${job.id}`).set(bearer(ws.ownerKey))).body.state === 'done' ? true : undefined),
    30_000,
    'the requeued erasure to finish',
  );
  await expect(ctx.workerServices.privacy.requeueStale()).resolves.toEqual({ requeued: 0 });
});

describe('POST /v1/tickets/{id}/events/{event_id}/redact', () => {
  test("removes one message's text from the timeline, its outbound events and the search, and leaves the others", async () => {
    const secret = `card 4111-1111-1111-${digits(4)}`;
    const mail = await ctx.http.post('/v1/ingest/email').send({ tenant_id: ws.tenantId, payload: emailPayload({ from: `r-${tag()}@x.test`, text: `My ${secret} please` }) });
    const ticketId = mail.body.ticket_id as string;
    const reply = await ctx.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(ws.ownerKey)).send({ body: 'Thanks, please do not send card numbers.' });
    expect(reply.status).toBeLessThan(300);
    const before = await ctx.http.get(`/v1/tickets/${ticketId}`).set(bearer(ws.ownerKey));
    const target = (before.body.events as { id: string; body: string }[]).find((e) => e.body.includes(secret))!;
    expect((await databaseHits(secret.toLowerCase())).length).toBeGreaterThan(0);
    const res = await ctx.http.post(`/v1/tickets/${ticketId}/events/${target.id}/redact`).set(bearer(ws.ownerKey)).send({ reason: 'card number' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: target.id, body: '[erased]', redacted_at: expect.any(String) });
    const hits = (await databaseHits(secret.toLowerCase())).filter((h) => !h.startsWith('audit_log'));
    expect(hits).toEqual([]);
    const after = await ctx.http.get(`/v1/tickets/${ticketId}`).set(bearer(ws.ownerKey));
    expect(after.headers.etag).not.toBe(before.headers.etag);
    const bodies = (after.body.events as { id: string; body: string }[]).map((e) => e.body);
    expect(bodies).toContain('Thanks, please do not send card numbers.');
    expect(bodies.filter((b) => b === '[erased]')).toHaveLength(1);
    // Again: no change, no error. A status change has no text to redact.
    expect((await ctx.http.post(`/v1/tickets/${ticketId}/events/${target.id}/redact`).set(bearer(ws.ownerKey)).send({})).status).toBe(200);
    const audit = await ctx.db.selectFrom('audit_log').select('action').where('tenant_id', '=', ws.tenantId).where('action', '=', 'ticket.event_redacted').where('target_id', '=', ticketId).execute();
    expect(audit).toHaveLength(1);
    const viewer = await addMember(ctx, ws, 'viewer');
    expect((await ctx.http.post(`/v1/tickets/${ticketId}/events/${target.id}/redact`).set(bearer(viewer.token)).send({})).status).toBe(403);
  });
});
