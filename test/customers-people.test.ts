/**
 * Customers as people (issue 38): update with If-Match, handles, merge (with its races), duplicates, and intake
 * threading to a merge's survivor.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { addMember, bearer, type Workspace } from './helpers/factories';
import { smsPayload, whatsappPayload, emailPayload } from './helpers/payloads';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws, workspaces } = useTestApp({ workers: true, workspaces: 2 });
const other = () => workspaces[1];

const tag = () => randomBytes(4).toString('hex');
const digits = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 10)).join('');

interface Customer {
  id: string;
  display_name: string;
  email: string;
  phone: string;
  notes: string;
  locale: string;
  time_zone: string;
  handles: { kind: string; handle: string }[];
  metadata: Record<string, unknown>;
  version: number;
  company: string;
}

async function createCustomer(w: Workspace, body: Record<string, unknown> = {}): Promise<Customer> {
  const res = await ctx.http
    .post('/v1/customers')
    .set(bearer(w.ownerKey))
    .send({ display_name: `Casey ${tag()}`, email: `casey-${tag()}@example.test`, ...body });
  if (res.status !== 201) throw new Error(`createCustomer: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const patch = (w: Workspace, id: string, body: unknown, ifMatch?: string) => {
  const req = ctx.http.patch(`/v1/customers/${id}`).set(bearer(w.ownerKey));
  return (ifMatch ? req.set('If-Match', ifMatch) : req).send(body as object);
};
const merge = (w: Workspace, id: string, into: string) => ctx.http.post(`/v1/customers/${id}/merge`).set(bearer(w.ownerKey)).send({ into });
const read = (w: Workspace, id: string) => ctx.http.get(`/v1/customers/${id}`).set(bearer(w.ownerKey));

async function createTicketFor(w: Workspace, customerId: string, subject = 'Where is my order?') {
  const res = await ctx.http.post('/v1/tickets').set(bearer(w.ownerKey)).send({ subject, description: 'It did not arrive.', customer_id: customerId });
  if (res.status !== 201) throw new Error(`ticket: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

const customerRow = (id: string) => ctx.db.selectFrom('customers').selectAll().where('id', '=', id).executeTakeFirst();

beforeAll(async () => {
  await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: {} }).expect(200);
  await ctx.http.put('/v1/channels/whatsapp').set(bearer(ws.ownerKey)).send({ config: {} }).expect(200);
  await ctx.http.put('/v1/channels/email').set(bearer(ws.ownerKey)).send({ config: { inbound_address: 'support@acme.test' } }).expect(200);
});

describe('PATCH /v1/customers/{id}', () => {
  test('changes the profile fields sent, keeps the rest, and answers the new version as its ETag', async () => {
    const c = await createCustomer(ws, { company: 'Acme', metadata: { plan: 'gold', crm: 'x1' } });
    const res = await patch(ws, c.id, {
      display_name: 'Maya Fischer',
      phone: '+4915112345678',
      notes: 'Prefers WhatsApp.',
      locale: 'de-DE',
      time_zone: 'Europe/Berlin',
      metadata: { crm: null, seats: 3 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ display_name: 'Maya Fischer', phone: '+4915112345678', notes: 'Prefers WhatsApp.', locale: 'de-DE', time_zone: 'Europe/Berlin', company: 'Acme', email: c.email });
    expect(res.body.metadata).toEqual({ plan: 'gold', seats: 3 });
    expect(res.body.version).toBe(c.version + 1);
    expect(res.headers.etag).toBe(`"${c.version + 1}"`);
    // The phone is held as a phone handle: SMS from it threads to this customer.
    expect(res.body.handles).toEqual([{ kind: 'phone', handle: '+4915112345678' }]);
    const again = await read(ws, c.id);
    expect(again.body).toMatchObject({ display_name: 'Maya Fischer', version: c.version + 1 });
    expect(again.headers.etag).toBe(`"${c.version + 1}"`);
  });

  test('a stale If-Match is 412 precondition_failed and nothing is written; the current one is accepted', async () => {
    const c = await createCustomer(ws);
    await patch(ws, c.id, { notes: 'first' }).expect(200);
    const stale = await patch(ws, c.id, { notes: 'lost update' }, `"${c.version}"`);
    expect(stale.status).toBe(412);
    expect(stale.body.code).toBe('precondition_failed');
    expect((await customerRow(c.id))!.notes).toBe('first');
    const fresh = await patch(ws, c.id, { notes: 'second' }, `"${c.version + 1}"`);
    expect(fresh.status).toBe(200);
    expect(fresh.body.notes).toBe('second');
  });

  test('an email another customer holds, in any case, is 409 customer_exists and nothing is written', async () => {
    const a = await createCustomer(ws);
    const b = await createCustomer(ws);
    const res = await patch(ws, b.id, { email: a.email.toUpperCase(), notes: 'should not stick' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('customer_exists');
    const row = await customerRow(b.id);
    expect(row!.email).toBe(b.email);
    expect(row!.notes).toBe('');
    // The same address in another workspace is someone else.
    const elsewhere = await createCustomer(other());
    expect((await patch(other(), elsewhere.id, { email: a.email })).status).toBe(200);
  });

  test('handles sent replace the set; a handle another customer holds is 409 handle_taken and nothing is written', async () => {
    const a = await createCustomer(ws);
    const b = await createCustomer(ws);
    const wa = `49${digits(10)}`;
    const tg = String(Date.now());
    const set = await patch(ws, a.id, { handles: [{ kind: 'whatsapp_id', handle: wa }, { kind: 'telegram_user', handle: tg }] });
    expect(set.status).toBe(200);
    expect(set.body.handles).toEqual([{ kind: 'telegram_user', handle: tg }, { kind: 'whatsapp_id', handle: wa }]);
    const taken = await patch(ws, b.id, { handles: [{ kind: 'whatsapp_id', handle: wa }], display_name: 'Not written' });
    expect(taken.status).toBe(409);
    expect(taken.body.code).toBe('handle_taken');
    expect((await customerRow(b.id))!.display_name).toBe(b.display_name);
    const replaced = await patch(ws, a.id, { handles: [{ kind: 'telegram_user', handle: tg }] });
    expect(replaced.body.handles).toEqual([{ kind: 'telegram_user', handle: tg }]);
  });

  test('refuses bad fields with 400 and writes nothing: a phone not in E.164, an unknown zone, a bad locale, an empty body', async () => {
    const c = await createCustomer(ws);
    for (const body of [{ phone: '0151 1234' }, { time_zone: 'Mars/Olympus' }, { locale: 'english!' }, {}, { handles: [{ kind: 'fax', handle: '1' }] }]) {
      const res = await patch(ws, c.id, body);
      expect(res.status).toBe(400);
    }
    expect(Number((await customerRow(c.id))!.version)).toBe(c.version);
  });

  test('a viewer cannot change a customer (403) and nothing is written', async () => {
    const c = await createCustomer(ws);
    const viewer = await addMember(ctx, ws, 'viewer');
    const res = await ctx.http.patch(`/v1/customers/${c.id}`).set(bearer(viewer.token)).send({ notes: 'x' });
    expect(res.status).toBe(403);
    expect((await customerRow(c.id))!.notes).toBe('');
  });

  test('emits customer.updated with the customer as it now stands, in the same transaction', async () => {
    const c = await createCustomer(ws);
    await patch(ws, c.id, { display_name: 'Updated Name' }).expect(200);
    const { rows } = await sql<{ data: { id: string; display_name: string } }>`SELECT data FROM events WHERE tenant_id = ${ws.tenantId} AND type = 'customer.updated' AND data->>'id' = ${c.id}`.execute(ctx.db);
    expect(rows.map((r) => r.data.display_name)).toEqual(['Updated Name']);
  });

  test('a retry with the same Idempotency-Key answers the first result and changes nothing more', async () => {
    const c = await createCustomer(ws);
    const key = `k-${tag()}`;
    const first = await ctx.http.patch(`/v1/customers/${c.id}`).set(bearer(ws.ownerKey)).set('Idempotency-Key', key).send({ notes: 'once' });
    const second = await ctx.http.patch(`/v1/customers/${c.id}`).set(bearer(ws.ownerKey)).set('Idempotency-Key', key).send({ notes: 'once' });
    expect(second.status).toBe(200);
    expect(second.body.version).toBe(first.body.version);
    expect(Number((await customerRow(c.id))!.version)).toBe(first.body.version);
  });

  test("a change of name reaches the search documents of the customer's tickets", async () => {
    const c = await createCustomer(ws);
    await createTicketFor(ws, c.id);
    const name = `Zebulon${tag()}`;
    await patch(ws, c.id, { display_name: name }).expect(200);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM ticket_search s JOIN tickets t ON t.tenant_id = s.tenant_id AND t.id = s.ticket_id
      WHERE t.customer_id = ${c.id} AND s.doc @@ plainto_tsquery('hd_simple', ${name.toLowerCase()})`.execute(ctx.db);
    expect(rows[0]!.n).toBe(1);
  });
});

describe('POST /v1/customers/{id}/merge', () => {
  test('moves handles, tickets and the address into the survivor in one go; the merged-away id answers merged_into_id', async () => {
    const loser = await createCustomer(ws, { company: 'Loser GmbH', metadata: { from_loser: true } });
    const survivor = await createCustomer(ws);
    await patch(ws, loser.id, { phone: `+49151${digits(8)}`, notes: 'loser notes' }).expect(200);
    const t1 = await createTicketFor(ws, loser.id);
    const t2 = await createTicketFor(ws, loser.id);
    const countBefore = (await ctx.http.get('/v1/customers?limit=1').set(bearer(ws.ownerKey))).body.total;
    const res = await merge(ws, loser.id, survivor.id);
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(survivor.id);
    expect(res.body.company).toBe('Loser GmbH');
    expect(res.body.notes).toBe('loser notes');
    expect(res.body.metadata).toMatchObject({ from_loser: true });
    expect(res.body.handles).toEqual(expect.arrayContaining([{ kind: 'email', handle: loser.email.toLowerCase() }, { kind: 'phone', handle: expect.stringMatching(/^\+49151/) }]));
    const tickets = await ctx.db.selectFrom('tickets').select(['id', 'customer_id']).where('id', 'in', [t1, t2]).execute();
    expect(tickets.every((t) => t.customer_id === survivor.id)).toBe(true);
    const gone = await read(ws, loser.id);
    expect(gone.status).toBe(200);
    expect(gone.body).toEqual({ id: loser.id, merged_into_id: survivor.id, merged_at: expect.any(String) });
    expect((await ctx.http.get('/v1/customers?limit=1').set(bearer(ws.ownerKey))).body.total).toBe(countBefore - 1);
    // The ticket reads show the survivor.
    const detail = await ctx.http.get(`/v1/tickets/${t1}`).set(bearer(ws.ownerKey));
    expect(detail.body.customer_id).toBe(survivor.id);
  });

  test('repeating a merge that is done answers the survivor again; merging into oneself is 400; an unknown id is 404', async () => {
    const a = await createCustomer(ws);
    const b = await createCustomer(ws);
    expect((await merge(ws, a.id, b.id)).status).toBe(200);
    const again = await merge(ws, a.id, b.id);
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(b.id);
    expect((await merge(ws, b.id, b.id)).status).toBe(400);
    expect((await merge(ws, b.id, '00000000-0000-4000-8000-000000000000')).status).toBe(404);
    // The merged-away customer cannot be merged elsewhere, changed, or be a target.
    const c = await createCustomer(ws);
    expect((await merge(ws, a.id, c.id)).body.code).toBe('customer_merged');
    expect((await merge(ws, c.id, a.id)).body.code).toBe('customer_merged');
    expect((await patch(ws, a.id, { notes: 'x' })).body.code).toBe('customer_merged');
  });

  test('a chain keeps pointing at the last survivor', async () => {
    const a = await createCustomer(ws);
    const b = await createCustomer(ws);
    const c = await createCustomer(ws);
    await merge(ws, a.id, b.id).expect(200);
    await merge(ws, b.id, c.id).expect(200);
    expect((await read(ws, a.id)).body.merged_into_id).toBe(c.id);
    expect((await read(ws, b.id)).body.merged_into_id).toBe(c.id);
  });

  test('two merges in opposite directions at the same time: one wins, the other gets 409, nothing is lost', async () => {
    for (let round = 0; round < 8; round += 1) {
      const a = await createCustomer(ws);
      const b = await createCustomer(ws);
      const ta = await createTicketFor(ws, a.id);
      const tb = await createTicketFor(ws, b.id);
      const [x, y] = await Promise.all([merge(ws, a.id, b.id), merge(ws, b.id, a.id)]);
      expect([x.status, y.status].sort()).toEqual([200, 409]);
      const loserRes = x.status === 409 ? x : y;
      expect(loserRes.body.code).toBe('customer_merged');
      const survivor = x.status === 200 ? x.body.id : y.body.id;
      const owners = await ctx.db.selectFrom('tickets').select('customer_id').where('id', 'in', [ta, tb]).execute();
      expect(owners.map((o) => o.customer_id)).toEqual([survivor, survivor]);
      const left = await ctx.db.selectFrom('customers').select('id').where('id', 'in', [a.id, b.id]).execute();
      expect(left.map((l) => l.id)).toEqual([survivor]);
    }
  });

  test('many merges into one survivor at once all land, each once', async () => {
    const survivor = await createCustomer(ws);
    const many = await Promise.all(Array.from({ length: 12 }, () => createCustomer(ws)));
    for (const m of many) await createTicketFor(ws, m.id);
    const results = await Promise.all(many.map((m) => merge(ws, m.id, survivor.id)));
    expect(results.map((r) => r.status)).toEqual(many.map(() => 200));
    const n = await ctx.db.selectFrom('tickets').select((eb) => eb.fn.countAll<string>().as('n')).where('customer_id', '=', survivor.id).executeTakeFirstOrThrow();
    expect(Number(n.n)).toBe(12);
    const handles = (await read(ws, survivor.id)).body.handles as { kind: string }[];
    expect(handles.filter((h) => h.kind === 'email')).toHaveLength(12);
  });

  test('later messages on any merged handle thread to the survivor: SMS, WhatsApp and the old address', async () => {
    const phone = `+1555${digits(7)}`;
    const wa = `1650${digits(7)}`;
    const sms = await ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: smsPayload({ from: phone, body: 'SMS hello' }) });
    const whats = await ctx.http.post('/v1/ingest/whatsapp').send({ tenant_id: ws.tenantId, payload: whatsappPayload({ from: wa, text: 'WA hello' }) });
    const address = `old-${tag()}@customer.test`;
    const mail = await ctx.http.post('/v1/ingest/email').send({ tenant_id: ws.tenantId, payload: emailPayload({ from: address, text: 'mail hello' }) });
    for (const r of [sms, whats, mail]) expect(r.status).toBe(200);
    const survivor = await createCustomer(ws);
    for (const r of [sms, whats, mail]) await merge(ws, r.body.customer_id, survivor.id).expect(200);
    const later = [
      await ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: smsPayload({ from: phone, body: 'SMS again' }) }),
      await ctx.http.post('/v1/ingest/whatsapp').send({ tenant_id: ws.tenantId, payload: whatsappPayload({ from: wa, text: 'WA again' }) }),
      await ctx.http.post('/v1/ingest/email').send({ tenant_id: ws.tenantId, payload: emailPayload({ from: address.toUpperCase(), text: 'mail again' }) }),
    ];
    expect(later.map((r) => r.body.customer_id)).toEqual([survivor.id, survivor.id, survivor.id]);
    // A ticket created by the old address through the API is the survivor's too, and the address cannot be a new customer.
    const byEmail = await ctx.http.post('/v1/tickets').set(bearer(ws.ownerKey)).send({ subject: 'x', description: 'y', customer_email: address });
    expect(byEmail.body.customer_id ?? byEmail.body.customer?.id).toBe(survivor.id);
    expect((await ctx.http.post('/v1/customers').set(bearer(ws.ownerKey)).send({ display_name: 'Dup', email: address })).status).toBe(409);
  });

  test('a merge racing messages on the merged-away handle: every message lands on a live customer and ends with the survivor', async () => {
    const phone = `+1555${digits(7)}`;
    const first = await ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: smsPayload({ from: phone, body: 'first' }) });
    const survivor = await createCustomer(ws);
    const sends = Array.from({ length: 10 }, (_, i) => ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: smsPayload({ from: phone, body: `msg ${i}` }) }));
    const [m, ...rest] = await Promise.all([merge(ws, first.body.customer_id, survivor.id), ...sends]);
    expect(m.status).toBe(200);
    expect(rest.every((r) => r.status === 200)).toBe(true);
    const owners = await ctx.db.selectFrom('tickets').select('customer_id').where('id', 'in', [first.body.ticket_id, ...rest.map((r) => r.body.ticket_id)]).execute();
    expect(new Set(owners.map((o) => o.customer_id))).toEqual(new Set([survivor.id]));
  });
});

describe('GET /v1/customers/{id}/duplicates', () => {
  test('suggests customers sharing a normalised email, a phone by its digits, or a name at one domain, with reasons', async () => {
    const domain = `d${tag()}.test`;
    const base = await createCustomer(ws, { display_name: 'Jo Lindqvist', email: `jo@${domain}` });
    const plus = await createCustomer(ws, { display_name: 'J. L.', email: `JO+shop@${domain}` });
    const sameName = await createCustomer(ws, { display_name: 'jo lindqvist', email: `jl@${domain}` });
    const phone = `+4670${digits(7)}`;
    await patch(ws, base.id, { phone }).expect(200);
    const byPhone = await createCustomer(ws);
    await patch(ws, byPhone.id, { handles: [{ kind: 'whatsapp_id', handle: phone.slice(1) }] }).expect(200);
    const unrelated = await createCustomer(ws);
    const res = await ctx.http.get(`/v1/customers/${base.id}/duplicates`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    const found = new Map((res.body.customers as { customer: { id: string }; reasons: string[] }[]).map((d) => [d.customer.id, d.reasons]));
    expect(found.get(plus.id)).toEqual(['email']);
    expect(found.get(sameName.id)).toEqual(['name_domain']);
    expect(found.get(byPhone.id)).toEqual(['phone']);
    expect(found.has(unrelated.id)).toBe(false);
    expect(found.has(base.id)).toBe(false);
    // Another workspace's look-alike is never suggested.
    const twin = await createCustomer(other(), { display_name: 'Jo Lindqvist', email: `jo+x@${domain}` });
    const again = await ctx.http.get(`/v1/customers/${base.id}/duplicates`).set(bearer(ws.ownerKey));
    expect((again.body.customers as { customer: { id: string } }[]).some((d) => d.customer.id === twin.id)).toBe(false);
  });
});
