/**
 * Webhook intake from Zendesk, Front and Help Scout (issue 7; spec: receive_webhook, Webhook result,
 * Authentication rule 11, Errors, Limits; provider facts: shared/providers.md): integrations, intake rules,
 * signatures and classification, over HTTP against the app with real workers running the `webhooks` queue.
 * Exactly-once recording and transcript reads: webhooks-recording.test.ts; deployment settings, the throttle
 * and a SIGKILLed worker: webhooks-operations.test.ts.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Response } from 'supertest';
import { addMember, bearer } from './helpers/factories';
import {
  frontEvent,
  frontSync,
  rawOf,
  zendeskEvent,
  type WebhookProvider,
} from './helpers/webhooks';
import { ISO, KITS, NOTHING, PROVIDERS, UUID, countRows, createIntegration, deliver, delivery, diff, expectEventOf, expectNothingWritten, getTranscript, headersFor, hex, newSecret, plainHeaders, postRaw, recorded, type Integration, useWebhookSuite } from './helpers/webhook-intake';

const { ctx, ws, ws2, signed, open } = useWebhookSuite();

// ------------------------------------------------------------------------------------- 1. integrations

describe('integrations (admin, admin-resources)', () => {
  test('POST /v1/integrations → 201 with id, provider, name, signing_secret_set and a webhook_url containing the id', async () => {
    for (const p of PROVIDERS) {
      const res = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: p, name: `  My ${p}  `, signing_secret: newSecret() });
      expect(res.status).toBe(201);
      expect(Object.keys(res.body).sort()).toEqual(['created_at', 'id', 'name', 'provider', 'signing_secret_set', 'webhook_url']);
      expect(res.body).toMatchObject({ id: expect.stringMatching(UUID), provider: p, name: `My ${p}`, signing_secret_set: true, created_at: expect.stringMatching(ISO) });
      expect(res.body.webhook_url).toMatch(new RegExp(`/v1/webhooks/${p}/${res.body.id}$`));
      expect(Math.abs(Date.parse(res.body.created_at) - Date.now())).toBeLessThan(60_000);

      const unsigned = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: p, name: 'No secret' });
      expect(unsigned.status).toBe(201);
      expect(unsigned.body.signing_secret_set).toBe(false);
    }
  });

  test('GET /v1/integrations lists the workspace\'s integrations only, newest first', async () => {
    const res = await ctx.http.get('/v1/integrations').set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    const ids = (res.body.integrations as Integration[]).map((i) => i.id);
    for (const p of PROVIDERS) expect(ids).toEqual(expect.arrayContaining([signed[p].id, open[p].id]));
    const created = (res.body.integrations as Integration[]).map((i) => Date.parse(i.created_at));
    expect(created).toEqual([...created].sort((a, b) => b - a));
    const mine = (res.body.integrations as Integration[]).find((i) => i.id === signed.zendesk.id)!;
    const { secret: _secret, ...shape } = signed.zendesk;
    expect(mine).toEqual(shape);
    expect(mine.signing_secret_set).toBe(true);

    const other = await ctx.http.get('/v1/integrations').set(bearer(ws2.ownerKey));
    expect(other.status).toBe(200);
    expect((other.body.integrations as Integration[]).map((i) => i.id)).not.toContain(signed.zendesk.id);
  });

  test('the signing secret never leaves the service: not in responses, list, audit log or logs; sealed in the database', async () => {
    const secret = `plain-${hex(12)}`;
    const rotated = `rotated-${hex(12)}`;
    const responses: Response[] = [];
    const created = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: 'zendesk', name: 'Leak check', signing_secret: secret });
    expect(created.status).toBe(201);
    responses.push(created);
    const id = created.body.id as string;
    responses.push(await ctx.http.put(`/v1/integrations/${id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: rotated }));
    responses.push(await ctx.http.get('/v1/integrations').set(bearer(ws.ownerKey)));
    // A delivery signed with it, accepted: nothing of the secret in that answer or its log line either.
    const integ: Integration = { ...(created.body as Integration), secret: rotated };
    responses.push(await deliver(ctx, integ, KITS.zendesk.ticket(KITS.zendesk.newTicketId())));
    expect(responses[3]!.status).toBe(200);
    const audit = await ctx.http.get('/v1/audit-log?limit=200').set(bearer(ws.ownerKey));
    expect(audit.status).toBe(200);
    responses.push(audit);

    for (const r of responses) {
      const text = JSON.stringify(r.body) + JSON.stringify(r.headers);
      expect(text).not.toContain(secret);
      expect(text).not.toContain(rotated);
    }
    // The audit log records what happened, without the secret.
    const entries = (audit.body.audit_entries as { action: string; target_id: string; details: Record<string, unknown> }[]).filter((e) => e.target_id === id);
    expect(entries.map((e) => e.action).sort()).toEqual(['integration.created', 'integration.signing_secret_set']);
    expect(entries.find((e) => e.action === 'integration.created')!.details).toMatchObject({ provider: 'zendesk', signing_secret_set: true });

    expect(ctx.logs.lines.length).toBeGreaterThan(0);
    for (const s of [secret, rotated]) {
      expect(ctx.logs.text).not.toContain(s);
      expect(ctx.logs.text).not.toContain(Buffer.from(s).toString('base64'));
    }

    const row = await ctx.db.selectFrom('integrations').select('signing_secret_sealed').where('id', '=', id).executeTakeFirstOrThrow();
    expect(row.signing_secret_sealed).toEqual(expect.any(String));
    for (const enc of ['utf8', 'base64', 'hex', 'base64url'] as const) {
      const form = Buffer.from(rotated).toString(enc);
      expect(row.signing_secret_sealed).not.toContain(form);
      expect(row.signing_secret_sealed).not.toContain(Buffer.from(secret).toString(enc));
    }
  });

  test('PUT signing-secret sets and rotates (old secret refused, new one accepted); "" removes it (unsigned accepted)', async () => {
    const kit = KITS.front;
    const i = await createIntegration(ctx, ws, 'front');
    expect(i.signing_secret_set).toBe(false);
    const first = newSecret();
    const set = await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: first });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ id: i.id, provider: 'front', name: i.name, signing_secret_set: true, webhook_url: i.webhook_url, created_at: i.created_at });
    // Now an unsigned delivery is refused and a signed one accepted.
    expect((await deliver(ctx, i, kit.ticket(kit.newTicketId()))).status).toBe(401);
    expect((await deliver(ctx, { ...i, secret: first }, kit.ticket(kit.newTicketId()))).status).toBe(200);

    const second = newSecret();
    const rotate = await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: second });
    expect(rotate.status).toBe(200);
    expect(rotate.body.signing_secret_set).toBe(true);
    const stale = await deliver(ctx, { ...i, secret: first }, kit.ticket(kit.newTicketId()));
    expect(stale.status).toBe(401);
    expect(stale.body.code).toBe('signature_invalid');
    expect((await deliver(ctx, { ...i, secret: second }, kit.ticket(kit.newTicketId()))).status).toBe(200);

    const removed = await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: '' });
    expect(removed.status).toBe(200);
    expect(removed.body.signing_secret_set).toBe(false);
    const row = await ctx.db.selectFrom('integrations').select('signing_secret_sealed').where('id', '=', i.id).executeTakeFirstOrThrow();
    expect(row.signing_secret_sealed).toBeNull();
    expect((await deliver(ctx, i, kit.ticket(kit.newTicketId()))).status).toBe(200);

    const audit = await ctx.http.get('/v1/audit-log?limit=200').set(bearer(ws.ownerKey));
    const actions = (audit.body.audit_entries as { action: string; target_id: string }[]).filter((e) => e.target_id === i.id).map((e) => e.action);
    expect(actions.sort()).toEqual(['integration.created', 'integration.signing_secret_removed', 'integration.signing_secret_set', 'integration.signing_secret_set']);

    // A too-short secret is refused and changes nothing.
    const short = await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: 'short' });
    expect(short.status).toBe(400);
  });

  test('DELETE → 204; the webhook URL then answers 404 and writes nothing; a second DELETE is 404', async () => {
    for (const p of PROVIDERS) {
      const i = await createIntegration(ctx, ws, p);
      const kit = KITS[p];
      expect((await deliver(ctx, i, kit.ticket(kit.newTicketId()))).status).toBe(200);
      const del = await ctx.http.delete(`/v1/integrations/${i.id}`).set(bearer(ws.ownerKey));
      expect(del.status).toBe(204);
      expect(del.text).toBe('');
      // Its transcripts and ledger go with it.
      expect(await countRows(ctx, i.id)).toEqual(NOTHING);
      await expectNothingWritten(ctx, async () => {
        const res = await deliver(ctx, i, kit.ticket(kit.newTicketId()));
        expect(res.status).toBe(404);
      });
      const list = await ctx.http.get('/v1/integrations').set(bearer(ws.ownerKey));
      expect((list.body.integrations as Integration[]).map((x) => x.id)).not.toContain(i.id);
      expect((await ctx.http.delete(`/v1/integrations/${i.id}`).set(bearer(ws.ownerKey))).status).toBe(404);
    }
  });

  test('an editor (and a viewer) gets 403 on every integration operation; nothing changes', async () => {
    const [editor, viewer] = await Promise.all([addMember(ctx, ws, 'editor'), addMember(ctx, ws, 'viewer')]);
    for (const who of [editor, viewer]) {
      const create = await ctx.http.post('/v1/integrations').set(bearer(who.token)).send({ provider: 'zendesk', name: 'Nope' });
      expect(create.status).toBe(403);
      expect(create.body.code).toBe('insufficient_role');
      expect((await ctx.http.get('/v1/integrations').set(bearer(who.token))).status).toBe(403);
      expect((await ctx.http.put(`/v1/integrations/${open.zendesk.id}/signing-secret`).set(bearer(who.token)).send({ signing_secret: newSecret() })).status).toBe(403);
      expect((await ctx.http.delete(`/v1/integrations/${open.zendesk.id}`).set(bearer(who.token))).status).toBe(403);
    }
    const list = await ctx.http.get('/v1/integrations').set(bearer(ws.ownerKey));
    const z = (list.body.integrations as Integration[]).find((x) => x.id === open.zendesk.id)!;
    expect(z.signing_secret_set).toBe(false);
    expect((list.body.integrations as Integration[]).some((x) => x.name === 'Nope')).toBe(false);
  });

  test('another workspace\'s integration id is 404 for PUT, DELETE and its transcripts, and stays intact', async () => {
    const i = await createIntegration(ctx, ws, 'helpscout');
    expect((await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws2.ownerKey)).send({ signing_secret: newSecret() })).status).toBe(404);
    expect((await ctx.http.delete(`/v1/integrations/${i.id}`).set(bearer(ws2.ownerKey))).status).toBe(404);
    expect((await ctx.http.get(`/v1/integrations/${i.id}/transcripts`).set(bearer(ws2.ownerKey))).status).toBe(404);
    const row = await ctx.db.selectFrom('integrations').selectAll().where('id', '=', i.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ tenant_id: ws.tenantId, signing_secret_sealed: null });
    // An unknown id is the same 404 for the owner.
    expect((await ctx.http.delete(`/v1/integrations/${randomUUID()}`).set(bearer(ws.ownerKey))).status).toBe(404);
  });

  test('an unknown provider, unknown fields, a missing name or a short secret in the body → 400, nothing created', async () => {
    const count = async () => Number((await sql<{ n: number }>`select count(*)::int as n from integrations`.execute(ctx.db)).rows[0]!.n);
    const before = await count();
    for (const body of [
      { provider: 'intercom', name: 'Unknown provider' },
      { provider: 'Zendesk', name: 'Upper case' },
      { provider: 'zendesk', name: 'Extra field', webhook_url: 'https://evil.test/' },
      { provider: 'zendesk', name: 'Extra field', tenant_id: ws2.tenantId },
      { provider: 'zendesk' },
      { provider: 'zendesk', name: 'Short secret', signing_secret: 'abc' },
    ]) {
      const res = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send(body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: 'validation_failed' });
    }
    const unknownField = await ctx.http.put(`/v1/integrations/${open.front.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: '', extra: 1 });
    expect(unknownField.status).toBe(400);
    expect(await count()).toBe(before);
  });
});

// ------------------------------------------------------------------------------------- 2. intake rules

describe('intake rules: a clear 4xx and nothing written', () => {
  test.each([['intercom'], ['Zendesk'], ['FRONT'], ['HelpScout'], ['help_scout']])('provider %p is not one of the three (lower case) → 404', async (provider) => {
    const lower = provider.toLowerCase() as WebhookProvider;
    const target = PROVIDERS.includes(lower) ? open[lower] : open.zendesk;
    const kit = KITS[target.provider];
    const d = kit.ticket(kit.newTicketId());
    await expectNothingWritten(ctx, async () => {
      const res = await postRaw(ctx, provider, target.id, d.raw, plainHeaders(target.provider, d));
      expect(res.status).toBe(404);
    });
    // The same delivery at the lower-case path is accepted: the 404 was the provider name's.
    expect((await postRaw(ctx, target.provider, target.id, d.raw, plainHeaders(target.provider, d))).status).toBe(200);
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: unknown, deleted, other-provider and malformed integration ids → 404', async (p) => {
    const kit = KITS[p];
    const deleted = await createIntegration(ctx, ws, p);
    await ctx.http.delete(`/v1/integrations/${deleted.id}`).set(bearer(ws.ownerKey)).expect(204);
    const otherProvider = open[PROVIDERS.find((x) => x !== p)!];
    await expectNothingWritten(ctx, async () => {
      for (const id of [randomUUID(), deleted.id, otherProvider.id, 'not-a-uuid', `${open[p].id}x`, '123']) {
        const d = kit.ticket(kit.newTicketId());
        const res = await postRaw(ctx, p, id, d.raw, plainHeaders(p, d));
        expect({ id, status: res.status }).toEqual({ id, status: 404 });
      }
    });
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: Content-Type text/plain (or none) → 415; application/json with a charset is fine', async (p) => {
    const kit = KITS[p];
    await expectNothingWritten(ctx, async () => {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
        const d = kit.ticket(kit.newTicketId());
        const res = await postRaw(ctx, p, open[p].id, d.raw, { ...plainHeaders(p, d), 'content-type': type });
        expect(res.status).toBe(415);
        expect(res.body.code).toBe('unsupported_media_type');
      }
      // No Content-Type at all (a Buffer body gets none from the client).
      const d = kit.ticket(kit.newTicketId());
      const { 'content-type': _ct, ...rest } = plainHeaders(p, d);
      const res = await ctx.http.post(`/v1/webhooks/${p}/${open[p].id}`).set(rest).send(Buffer.from(d.raw));
      expect(res.request.getHeader('content-type')).toBeUndefined();
      expect(res.status).toBe(415);
    });
    const d = kit.ticket(kit.newTicketId());
    const ok = await postRaw(ctx, p, open[p].id, d.raw, { ...plainHeaders(p, d), 'content-type': 'application/json; charset=utf-8' });
    expect(ok.status).toBe(200);
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: a body that is not JSON → 400; JSON that is not an object → 400 webhook_payload_invalid', async (p) => {
    const kit = KITS[p];
    const headers = plainHeaders(p, kit.ticket(kit.newTicketId()));
    await expectNothingWritten(ctx, async () => {
      for (const raw of ['{"id": 1,', 'ticket_id=123', '']) {
        const res = await postRaw(ctx, p, open[p].id, raw, headers);
        expect({ raw, status: res.status }).toEqual({ raw, status: 400 });
      }
      for (const raw of ['[{"ticket_id":123}]', '"zen:ticket:123"', '123', 'null', 'true']) {
        const res = await postRaw(ctx, p, open[p].id, raw, headers);
        expect({ raw, status: res.status, code: res.body.code }).toEqual({ raw, status: 400, code: 'webhook_payload_invalid' });
      }
    });
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: a 1 MiB+ body → 413 (a ticket event that would otherwise be recorded)', async (p) => {
    const kit = KITS[p];
    const d = kit.ticket(kit.newTicketId());
    const padded = { ...d.body, padding: 'x'.repeat(1024 * 1024) };
    const raw = rawOf(padded);
    expect(Buffer.byteLength(raw)).toBeGreaterThan(1024 * 1024);
    await expectNothingWritten(ctx, async () => {
      const res = await postRaw(ctx, p, open[p].id, raw, plainHeaders(p, d));
      expect(res.status).toBe(413);
      expect(res.body.code).toBe('payload_too_large');
    });
    // Just under the limit, the same event is recorded.
    const fits = rawOf({ ...d.body, padding: 'x'.repeat(1024 * 1024 - Buffer.byteLength(d.raw) - 64) });
    expect(Buffer.byteLength(fits)).toBeLessThanOrEqual(1024 * 1024);
    expect((await postRaw(ctx, p, open[p].id, fits, plainHeaders(p, d))).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------- 3. signatures

describe('signatures', () => {
  describe.each(PROVIDERS.map((p) => [p]))('%s with a signing secret', (p) => {
    const kit = KITS[p];

    test('correctly signed → 200 {status: ok, transcript_id, external_ticket_id}, recorded', async () => {
      const ticketId = kit.newTicketId();
      const d = kit.ticket(ticketId);
      const before = await countRows(ctx, signed[p].id);
      const res = await deliver(ctx, signed[p], d);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ok', transcript_id: expect.stringMatching(UUID), external_ticket_id: ticketId });
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 1, transcripts: 1, events: 1 });
    });

    test('tampered body, wrong secret, missing headers, a signature over another body → 401 signature_invalid, nothing written', async () => {
      const d = kit.ticket(kit.newTicketId());
      const good = headersFor(p, d, signed[p].secret);
      const other = kit.ticket(kit.newTicketId());
      const signatureHeaders = Object.keys(good).filter((h) => /signature|timestamp/.test(h));
      expect(signatureHeaders.length).toBeGreaterThan(0);
      const cases: [string, string, Record<string, string>][] = [
        ['tampered body (one character changed)', d.raw.replace(/"(Open|active|unassigned)"/, (_, s: string) => `"${s.toUpperCase()}"`), good],
        ['tampered body (trailing whitespace)', `${d.raw} `, good],
        ['wrong secret', d.raw, headersFor(p, d, newSecret())],
        ['no signature headers', d.raw, plainHeaders(p, d)],
        ...signatureHeaders.map((h): [string, string, Record<string, string>] => [`without ${h}`, d.raw, Object.fromEntries(Object.entries(good).filter(([k]) => k !== h))]),
        ['a valid signature over a different body', d.raw, headersFor(p, other, signed[p].secret)],
        ['an empty signature', d.raw, { ...good, ...Object.fromEntries(signatureHeaders.filter((h) => /signature$/.test(h)).map((h) => [h, ''])) }],
        ['a garbage signature', d.raw, { ...good, ...Object.fromEntries(signatureHeaders.filter((h) => /signature$/.test(h)).map((h) => [h, '!!!not base64!!!'])) }],
      ];
      expect(cases[0]![1]).not.toBe(d.raw);
      await expectNothingWritten(ctx, async () => {
        for (const [what, raw, headers] of cases) {
          const res = await postRaw(ctx, p, signed[p].id, raw, headers);
          expect({ what, status: res.status, code: res.body.code }).toEqual({ what, status: 401, code: 'signature_invalid' });
        }
      });
      // The untouched delivery still goes through: the refusals were the signatures'.
      expect((await postRaw(ctx, p, signed[p].id, d.raw, good)).status).toBe(200);
    });

    test('a signed non-ticket event with a bad signature is 401 too (verified before classification)', async () => {
      const [d] = kit.nonTicket();
      const res = await postRaw(ctx, p, signed[p].id, d!.raw, headersFor(p, d!, newSecret()));
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('signature_invalid');
    });

    if (p !== 'helpscout') {
      test('a timestamp 6 minutes old (or ahead) → 401; 4 minutes old is within the window', async () => {
        await expectNothingWritten(ctx, async () => {
          for (const offset of [-6 * 60_000, 6 * 60_000, -60 * 60_000]) {
            const d = kit.ticket(kit.newTicketId());
            const res = await deliver(ctx, signed[p], d, { now: new Date(Date.now() + offset) });
            expect({ offset, status: res.status, code: res.body.code }).toEqual({ offset, status: 401, code: 'signature_invalid' });
          }
        });
        const d = kit.ticket(kit.newTicketId());
        expect((await deliver(ctx, signed[p], d, { now: new Date(Date.now() - 4 * 60_000) })).status).toBe(200);
      });
    }
  });

  test.each(PROVIDERS.map((p) => [p]))('%s without a signing secret: unsigned deliveries are accepted (signature headers ignored)', async (p) => {
    const kit = KITS[p];
    const a = kit.ticket(kit.newTicketId());
    const res = await deliver(ctx, open[p], a);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
    const b = kit.ticket(kit.newTicketId());
    expect((await postRaw(ctx, p, open[p].id, b.raw, headersFor(p, b, newSecret()))).status).toBe(200);
  });
});

// ------------------------------------------------------------------------------------ 4. classification

describe('classification', () => {
  describe.each(PROVIDERS.map((p) => [p]))('%s', (p) => {
    const kit = KITS[p];

    test('non-ticket events → 200 {status: ignored} exactly, nothing written', async () => {
      await expectNothingWritten(ctx, async () => {
        for (const d of kit.nonTicket()) {
          const res = await deliver(ctx, signed[p], d);
          expect({ type: d.event ?? d.body.type, status: res.status, body: res.body }).toEqual({ type: d.event ?? d.body.type, status: 200, body: { status: 'ignored' } });
        }
      });
    });

    test('first sight of a ticket creates its transcript; a second event appends to it, in order', async () => {
      const ticketId = kit.newTicketId();
      const a = kit.ticket(ticketId, 0);
      const b = kit.ticket(ticketId, 1);
      const before = await countRows(ctx, signed[p].id);
      const ra = await recorded(ctx, signed[p], a);
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 1, transcripts: 1, events: 1 });
      const rb = await recorded(ctx, signed[p], b);
      expect(rb).toEqual({ status: 'ok', transcript_id: ra.transcript_id, external_ticket_id: ticketId });
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 2, transcripts: 1, events: 2 });

      const t = await getTranscript(ctx, ws.ownerKey, ra.transcript_id);
      expect(t).toMatchObject({ id: ra.transcript_id, integration_id: signed[p].id, provider: p, external_ticket_id: ticketId, event_count: 2, limit: 50, offset: 0 });
      expect(t.created_at).toMatch(ISO);
      expect(Date.parse(t.updated_at)).toBeGreaterThanOrEqual(Date.parse(t.created_at));
      // Newest first.
      expect(t.events).toHaveLength(2);
      expectEventOf(t.events[0]!, b);
      expectEventOf(t.events[1]!, a);
      expect(Date.parse(t.events[0]!.received_at)).toBeGreaterThanOrEqual(Date.parse(t.events[1]!.received_at));

      // The same ticket id at another integration is another transcript.
      const elsewhere = await recorded(ctx, open[p], kit.ticket(ticketId, 2));
      expect(elsewhere.transcript_id).not.toBe(ra.transcript_id);
    });

    test('a partial payload is recorded with what it has', async () => {
      const ticketId = kit.newTicketId();
      const first = await recorded(ctx, signed[p], kit.ticket(ticketId));
      const d = kit.partial(ticketId);
      const before = await countRows(ctx, signed[p].id);
      const r = await recorded(ctx, signed[p], d);
      expect(r).toEqual({ status: 'ok', transcript_id: first.transcript_id, external_ticket_id: ticketId });
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 1, transcripts: 0, events: 1 });
      const t = await getTranscript(ctx, ws.ownerKey, r.transcript_id);
      expectEventOf(t.events[0]!, d);

      // A partial payload about a ticket never seen opens its transcript.
      const fresh = kit.newTicketId();
      const alone = await recorded(ctx, signed[p], kit.partial(fresh));
      expect(alone.external_ticket_id).toBe(fresh);
      expect(alone.transcript_id).not.toBe(first.transcript_id);
    });

    test('a ticket event with no ticket id anywhere → 400 webhook_payload_invalid, nothing written', async () => {
      await expectNothingWritten(ctx, async () => {
        for (const d of kit.noTicketId()) {
          const res = await deliver(ctx, signed[p], d);
          expect(res.status).toBe(400);
          expect(res.body.code).toBe('webhook_payload_invalid');
        }
      });
    });
  });

  test('front: sync echoes the X-Front-Challenge value and writes nothing', async () => {
    const challenge = `chl_${hex(8)}`;
    await expectNothingWritten(ctx, async () => {
      const res = await deliver(ctx, signed.front, delivery(frontSync(), { challenge }));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ignored', challenge });
      const unsignedRes = await deliver(ctx, open.front, delivery(frontSync(), { challenge: 'second' }));
      expect(unsignedRes.body).toEqual({ status: 'ignored', challenge: 'second' });
    });
  });

  test('front: application-webhook envelopes (inbound_received, outbound_sent, conversation_archived) and rule webhooks are recorded by their event type', async () => {
    const conversationId = KITS.front.newTicketId();
    for (const type of ['inbound', 'outbound', 'archive']) {
      const body = frontEvent({ type, conversationId });
      expect(body.type).not.toBe(type);
      const r = await recorded(ctx, signed.front, delivery(body));
      expect(r.external_ticket_id).toBe(conversationId);
    }
    // A rule webhook posts the event object itself, with no envelope.
    const rule = frontEvent({ type: 'tag', conversationId }).payload as Record<string, unknown>;
    const r = await recorded(ctx, signed.front, delivery(rule));
    expect(r.external_ticket_id).toBe(conversationId);
    const t = await getTranscript(ctx, ws.ownerKey, r.transcript_id);
    expect(t.events.map((e: { type: string }) => e.type).sort()).toEqual(['archive', 'inbound', 'outbound', 'tag']);
    // An application event whose event object is not a conversation event is still ignored.
    const mention = await deliver(ctx, signed.front, delivery(frontEvent({ type: 'mention', envelopeType: 'mention_added' })));
    expect(mention.body).toEqual({ status: 'ignored' });
  });

  test('helpscout: a delivery without X-HelpScout-Event is refused (400), nothing written', async () => {
    const d = KITS.helpscout.ticket(KITS.helpscout.newTicketId());
    await expectNothingWritten(ctx, async () => {
      const res = await postRaw(ctx, 'helpscout', open.helpscout.id, d.raw, { 'content-type': 'application/json' });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('webhook_payload_invalid');
    });
  });

  test('zendesk: a numeric ticket id is recorded as a string; a trigger and an event about the same ticket share a transcript', async () => {
    const ticketId = KITS.zendesk.newTicketId();
    const fromEvent = await recorded(ctx, signed.zendesk, delivery(zendeskEvent({ ticketId: Number(ticketId) })));
    expect(fromEvent.external_ticket_id).toBe(ticketId);
    const fromTrigger = await recorded(ctx, signed.zendesk, KITS.zendesk.partial(ticketId));
    expect(fromTrigger).toEqual(fromEvent);
    const nested = await recorded(ctx, signed.zendesk, delivery({ ticket: { id: Number(ticketId), status: 'Closed' }, note: 'nested placeholder' }));
    expect(nested.transcript_id).toBe(fromEvent.transcript_id);
  });
});

