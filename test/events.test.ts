/**
 * Outbound events (issue 19): the transactional outbox and the event log. Each change emits its events in
 * its own transaction (none for a change that rolls back), and GET /v1/events lists them in commit order: a
 * reader following next_cursor while writers race never finds a gap close behind its cursor.
 */
import { startTestApp } from './helpers/context';
import { bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { changeRolledBack, createTicket } from './helpers/tickets';
import { createIntegration, deliver, KITS, newSecret } from './helpers/webhook-intake';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

type Event = { id: string; type: string; occurred_at: string; tenant_id: string; data: { ticket?: Record<string, unknown>; event?: { id: string; kind: string; meta: Record<string, unknown> }; message_kind?: string } };

/** The whole log from the start (or from `after`), following next_cursor while has_more; returns where to resume. */
async function log(w: Workspace, q = '', after?: string): Promise<{ events: Event[]; cursor: string | null }> {
  const events: Event[] = [];
  let cursor = after ?? null;
  for (;;) {
    const res: { status: number; body: { events: Event[]; next_cursor: string | null; has_more: boolean } } = await ctx.http
      .get(`/v1/events?limit=50${q}${cursor ? `&after=${cursor}` : ''}`)
      .set(bearer(w.ownerKey));
    expect(res.status).toBe(200);
    events.push(...res.body.events);
    cursor = res.body.next_cursor;
    if (!res.body.has_more) return { events, cursor };
  }
}
const forTicket = (events: Event[], id: string) => events.filter((e) => e.data.ticket?.id === id);

test('a ticket\'s life is in the log in order: created, status changed, a reply and a note as message.created, each with the ticket and the causing event', async () => {
  const w = await createWorkspace(ctx);
  const t = (await createTicket(ctx, w, { subject: 'Printer on fire' })) as { id: string };
  await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(w.ownerKey)).send({ status: 'pending' }).expect(200);
  await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(w.ownerKey)).send({ body: 'On it' }).expect(201);
  await ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(w.ownerKey)).send({ body: 'Call facilities' }).expect(201);
  const { events } = await log(w);
  const mine = forTicket(events, t.id);
  expect(mine.map((e) => e.type)).toEqual(['ticket.created', 'ticket.status_changed', 'message.created', 'message.created']);
  expect(mine.map((e) => e.data.message_kind ?? null)).toEqual([null, null, 'reply', 'note']);
  for (const e of mine) {
    expect(e.tenant_id).toBe(w.tenantId);
    expect(e.data.ticket).toMatchObject({ id: t.id, subject: 'Printer on fire' });
    expect(e.data.ticket).not.toHaveProperty('events');
    expect(e.data.ticket).not.toHaveProperty('version');
  }
  // The ticket as it stood after each change.
  expect(mine[1]!.data.ticket!.status).toBe('pending');
  expect(mine[1]!.data.event).toMatchObject({ kind: 'status_changed', meta: { from: 'open', to: 'pending' } });
  // The log's event ids are stable: reading again gives the same ids.
  expect(forTicket((await log(w)).events, t.id).map((e) => e.id)).toEqual(mine.map((e) => e.id));
});

test('the cursor is a resume point: after the end it returns nothing, then exactly what committed since', async () => {
  const w = await createWorkspace(ctx);
  await createTicket(ctx, w);
  const first = await log(w);
  expect(first.cursor).toEqual(expect.any(String));
  const quiet = await log(w, '', first.cursor!);
  expect(quiet.events).toEqual([]);
  expect(quiet.cursor).toBe(first.cursor);
  const t = (await createTicket(ctx, w)) as { id: string };
  const later = await log(w, '&types=ticket.created', first.cursor!);
  expect(later.events.map((e) => [e.type, e.data.ticket?.id])).toEqual([['ticket.created', t.id]]);
});

test('filters by types, and refuses an unknown type', async () => {
  const w = await createWorkspace(ctx);
  const t = (await createTicket(ctx, w)) as { id: string };
  await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(w.ownerKey)).send({ body: 'Hello' }).expect(201);
  const { events } = await log(w, '&types=message.created');
  expect(events.map((e) => e.type)).toEqual(['message.created']);
  const bad = await ctx.http.get('/v1/events?types=ticket.exploded').set(bearer(w.ownerKey));
  expect(bad.status).toBe(400);
});

test('a change that rolls back emits nothing', async () => {
  const w = await createWorkspace(ctx);
  const t = (await createTicket(ctx, w)) as { id: string };
  const before = (await log(w)).events.length;
  await changeRolledBack(ctx, w, t.id);
  expect((await log(w)).events).toHaveLength(before);
  expect(await ctx.db.selectFrom('events').select('id').where('tenant_id', '=', w.tenantId).execute()).toHaveLength(before);
});

test('20 concurrent writers on one ticket: its events are in the log in the order the changes committed', async () => {
  const w = await createWorkspace(ctx);
  const t = (await createTicket(ctx, w)) as { id: string };
  const answers = await Promise.all(
    Array.from({ length: 20 }, (_, i) => ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(w.ownerKey)).send({ tags: [`t${i}`] })),
  );
  for (const a of answers) expect(a.status).toBe(200);
  const updates = forTicket((await log(w)).events, t.id).filter((e) => e.type === 'ticket.updated');
  expect(updates).toHaveLength(20);
  // Each change starts from what the one before it left: the log's order is the order of the changes.
  const changes = updates.map((e) => (e.data.event!.meta as { changes: { tags: { from: string[]; to: string[] } } }).changes.tags);
  for (let i = 1; i < changes.length; i += 1) expect(changes[i]!.from).toEqual(changes[i - 1]!.to);
  expect(updates.at(-1)!.data.ticket!.tags).toEqual(changes.at(-1)!.to);
});

test('a reader following the cursor while writers race on many tickets sees every event exactly once, none behind its cursor', async () => {
  const w = await createWorkspace(ctx);
  const tickets = await Promise.all(Array.from({ length: 6 }, () => createTicket(ctx, w) as Promise<{ id: string }>));
  const seen: string[] = [];
  let cursor: string | null = null;
  let writing = true;
  const reader = (async () => {
    for (let idle = 0; idle < 3; ) {
      const res: { body: { events: Event[]; next_cursor: string | null } } = await ctx.http.get(`/v1/events?limit=7${cursor ? `&after=${cursor}` : ''}`).set(bearer(w.ownerKey));
      seen.push(...res.body.events.map((e) => e.id));
      cursor = res.body.next_cursor;
      if (!writing && res.body.events.length === 0) idle += 1;
    }
  })();
  await Promise.all(
    tickets.flatMap((t, i) =>
      Array.from({ length: 5 }, (_, j) => ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(w.ownerKey)).send({ tags: [`w${i}-${j}`] })),
    ),
  );
  writing = false;
  await reader;
  const all = (await log(w)).events.map((e) => e.id);
  expect(new Set(seen).size).toBe(seen.length);
  expect([...seen].sort()).toEqual([...all].sort());
});

test('reading the log takes events:read; a key without it gets 403', async () => {
  const key = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read'] });
  expect((await ctx.http.get('/v1/events').set(bearer(key.secret))).status).toBe(403);
  const reader = await mintKey(ctx, ws.ownerKey, { scopes: ['events:read'] });
  expect((await ctx.http.get('/v1/events').set(bearer(reader.secret))).status).toBe(200);
});

describe('events beyond tickets, each in the transaction of its change', () => {
  test('customer.created, from the API and from a ticket opened for a new address; an existing customer emits none', async () => {
    const w = await createWorkspace(ctx);
    const made = await ctx.http.post('/v1/customers').set(bearer(w.ownerKey)).send({ display_name: 'Maya Fischer', email: 'maya@fischer.test' });
    expect(made.status).toBe(201);
    await createTicket(ctx, w, { customer_email: 'new.person@fischer.test' });
    await createTicket(ctx, w, { customer_email: 'maya@fischer.test' });
    const customers = (await log(w, '&types=customer.created')).events;
    expect(customers.map((e) => (e.data as { email: string }).email)).toEqual(['maya@fischer.test', 'new.person@fischer.test']);
    expect(customers[0]!.data).toMatchObject({ id: made.body.id, display_name: 'Maya Fischer' });
    // Refused as a duplicate: nothing written, nothing emitted.
    expect((await ctx.http.post('/v1/customers').set(bearer(w.ownerKey)).send({ display_name: 'Again', email: 'MAYA@fischer.test' })).status).toBe(409);
    expect((await log(w, '&types=customer.created')).events).toHaveLength(2);
  });

  test('csat.created carries the response as its create answer shows it', async () => {
    const w = await createWorkspace(ctx);
    const t = (await createTicket(ctx, w)) as { id: string };
    const res = await ctx.http.post(`/v1/tickets/${t.id}/csat`).set(bearer(w.ownerKey)).send({ score: 4, comment: 'Quick fix' });
    expect(res.status).toBe(201);
    const csat = (await log(w, '&types=csat.created')).events;
    expect(csat).toHaveLength(1);
    expect(csat[0]!.data).toEqual(res.body);
  });

  test('transcript.event_recorded for each provider event recorded, once, however often it is redelivered', async () => {
    const wctx = await startTestApp();
    try {
      await wctx.startWorkers();
      const w = await createWorkspace(wctx);
      const integration = await createIntegration(wctx, w, 'zendesk', newSecret());
      const delivery = KITS.zendesk.ticket(KITS.zendesk.newTicketId());
      expect((await deliver(wctx, integration, delivery)).status).toBe(200);
      expect((await deliver(wctx, integration, delivery)).status).toBe(200);
      const res = await wctx.http.get('/v1/events?types=transcript.event_recorded').set(bearer(w.ownerKey));
      expect(res.body.events).toHaveLength(1);
      expect(res.body.events[0].data).toMatchObject({ integration_id: integration.id, event: { provider_event_id: delivery.expected!.provider_event_id, subject: delivery.expected!.subject } });
    } finally {
      await wctx.close();
    }
  });
});
