/**
 * The connected mailbox at work (workers running): polling through the email ingest ledger, replies sent
 * through the mailbox and joining the customer's conversation, and what the workers did, seen from outside.
 */
import { createWorkspace, type Workspace } from './helpers/factories';
import { ingest, ticketDetail } from './helpers/ingest';
import { emailPayload } from './helpers/payloads';
import { eventually } from './helpers/wait';
import { ISO, PROVIDERS, checkOf, tag, tokenCalls, useMailProviderDouble, useMailboxApp } from './helpers/mailbox';

const double = useMailProviderDouble();

describe('Connected mailbox, workers running', () => {
  const { ctx, h } = useMailboxApp();

  describe.each(PROVIDERS)('%s polling through the ingest ledger', (p) => {
    let ws: Workspace;
    let mailbox: string;
    const customer = `cust.${p}.${tag()}@customer.test`;
    // A Message-ID as mail clients write them: mixed case, brackets added by the double.
    const firstId = `CAF${tag()}.Xy+Z@Mail.Customer.Test`;
    const firstKey = firstId.toLowerCase();
    const subject = `Parcel ${tag()} never arrived`;
    let ticketId: string;

    beforeAll(async () => {
      ws = await createWorkspace(ctx);
      mailbox = (await h.connect(ws, p)).email;
    });

    test('the first poll only establishes the cursor: inbound_cursor_set true, last_polled_at set, mail already in the inbox not imported', async () => {
      double.deliver(p, mailbox, { from: `old.${tag()}@customer.test`, subject: 'Old mail', text: 'From before the connection', messageId: `${tag()}@old.test` });
      const r = await h.poll(ws.tenantId);
      expect(r).toMatchObject({ fetched: 0 });
      const s = await h.statusOk(ws);
      expect(s.inbound_cursor_set).toBe(true);
      expect(s.last_polled_at).toMatch(ISO);
      expect(await h.count('tickets', ws.tenantId)).toBe(0);
      expect(await h.count('ingest_deliveries', ws.tenantId)).toBe(0);
    });

    test('a delivered message becomes one email ticket with an inbound_email event, in the ledger under its Message-ID (lower-cased, no brackets)', async () => {
      double.deliver(p, mailbox, { from: customer, fromName: 'Ada Lovelace', subject, text: 'My parcel never arrived.', messageId: firstId });
      const r = await h.poll(ws.tenantId);
      expect(r).toMatchObject({ fetched: 1, ingested: 1 });
      const tickets = await h.tickets(ws.tenantId);
      expect(tickets).toHaveLength(1);
      ticketId = tickets[0]!.id;
      const t = await ticketDetail(ctx, ws, ticketId);
      expect(t).toMatchObject({ source: 'email', subject, customer_email: customer });
      expect(t.events.map((e) => e.kind)).toEqual(['inbound_email']);
      expect(t.events[0]).toMatchObject({ actor_type: 'customer', body: 'My parcel never arrived.' });

      const ledger = await ctx.db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', ws.tenantId).execute();
      expect(ledger).toHaveLength(1);
      expect(ledger[0]).toMatchObject({ channel: 'email', provider_message_id: firstKey, ticket_id: ticketId, was_created: true, duplicate_count: 0 });

      const s = await h.statusOk(ws);
      expect(s.last_polled_at).toMatch(ISO);
      expect(checkOf(s, 'inbound_polling').status).toBe('ok');
    });

    test('the same email pushed to POST /v1/ingest/email is a duplicate of the polled one: was_duplicate true, no second ticket', async () => {
      const payload = emailPayload({ from: customer, fromName: 'Ada Lovelace', subject, text: 'My parcel never arrived.', messageId: firstId });
      const res = await ingest(ctx, 'email', payload, ws.tenantId);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ ticket_id: ticketId, was_duplicate: true, was_created: false });
      expect(await h.count('tickets', ws.tenantId)).toBe(1);
      const ledger = await ctx.db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', ws.tenantId).execute();
      expect(ledger).toHaveLength(1);
      expect(ledger[0]!.duplicate_count).toBe(1);
      expect((await ticketDetail(ctx, ws, ticketId)).events.filter((e) => e.kind === 'inbound_email')).toHaveLength(1);
    });

    test('polling again with no new mail ingests nothing', async () => {
      const before = (await h.row(ws.tenantId))!;
      const r = await h.poll(ws.tenantId);
      expect(r).toMatchObject({ fetched: 0 });
      expect(await h.count('tickets', ws.tenantId)).toBe(1);
      expect(await h.count('ingest_deliveries', ws.tenantId)).toBe(1);
      const after = (await h.row(ws.tenantId))!;
      expect(after.inbound_cursor).not.toBeNull();
      expect(after.last_polled_at!.getTime()).toBeGreaterThanOrEqual(before.last_polled_at!.getTime());
    });

    test('a reply delivered with In-Reply-To the first message threads into the same ticket', async () => {
      double.deliver(p, mailbox, { from: customer, subject: `Re: ${subject}`, text: 'Any news?', messageId: `${tag()}@mail.customer.test`, inReplyTo: firstId, references: [firstId] });
      const r = await h.poll(ws.tenantId);
      expect(r).toMatchObject({ fetched: 1, ingested: 1 });
      expect(await h.count('tickets', ws.tenantId)).toBe(1);
      const t = await ticketDetail(ctx, ws, ticketId);
      expect(t.events.filter((e) => e.kind === 'inbound_email').map((e) => e.body)).toEqual(['My parcel never arrived.', 'Any news?']);
    });
  });

  describe.each(PROVIDERS)('%s outbound replies', (p) => {
    let ws: Workspace;
    let mailbox: string;
    let mail: { ticketId: string; customer: string; messageId: string; subject: string; providerId: string };
    let replyEventId: string;
    const replyText = 'We have found your parcel; it ships today.';

    beforeAll(async () => {
      ws = await createWorkspace(ctx);
      mailbox = (await h.connect(ws, p)).email;
      mail = await h.emailTicket(ws, p, mailbox, { messageId: `${tag()}.${Date.now()}@mail.customer.test` });
    });

    test('a reply on the polled ticket reaches the provider with To, Subject "Re: …", In-Reply-To, References and a Message-ID, and is recorded as sent', async () => {
      const { eventId, event } = await h.reply(ws, mail.ticketId, replyText);
      replyEventId = eventId;
      expect(event.meta).toMatchObject({ delivery: 'queued', channel: 'email' });
      const row = await eventually(async () => {
        const o = await h.outbound(ws.tenantId, eventId);
        return o?.state === 'sent' ? o : undefined;
      }, 10_000, 'the reply to be sent');
      expect(row).toMatchObject({ ticket_id: mail.ticketId, attempts: 1, last_error: null });
      expect(row.sent_at).toBeInstanceOf(Date);

      const sent = double.sent(p, mailbox);
      expect(sent).toHaveLength(1);
      const m = sent[0]!;
      expect(m.headers.to).toContain(mail.customer);
      expect(m.headers.from).toContain(mailbox);
      expect(m.headers.subject).toBe(`Re: ${mail.subject}`);
      expect(m.headers['in-reply-to']).toBe(`<${mail.messageId}>`);
      expect(m.headers.references?.split(/\s+/)).toContain(`<${mail.messageId}>`);
      expect(m.headers['message-id']).toMatch(/^<[^<>\s@]+@[^<>\s@]+>$/);
      expect(m.headers['message-id']).toBe(`<${row.message_id}>`);
      expect(m.text).toContain(replyText);

      const deliveries = await h.deliveries(ws, mail.ticketId);
      expect(deliveries).toHaveLength(1);
      expect(deliveries[0]!.meta).toMatchObject({ state: 'sent', reply_event_id: eventId, message_id: row.message_id });

      const s = await h.statusOk(ws);
      expect(s.sent_today).toBe(1);
      expect(checkOf(s, 'daily_send_quota').status).toBe('ok');
    });

    test('running the send job again for the same reply sends nothing more', async () => {
      expect(replyEventId).toBeDefined();
      const again = await ctx.services.outbound.send(ws.tenantId, replyEventId);
      expect(again).toEqual({ state: 'not_due' });
      expect(double.sent(p, mailbox)).toHaveLength(1);
      expect(await h.deliveries(ws, mail.ticketId)).toHaveLength(1);
      expect((await h.statusOk(ws)).sent_today).toBe(1);
    });

    test('the customer\'s answer to the reply threads back into the ticket by the reply\'s Message-ID', async () => {
      const ours = double.sent(p, mailbox)[0]!.headers['message-id']!;
      double.deliver(p, mailbox, { from: mail.customer, subject: `Re: ${mail.subject}`, text: 'Thanks!', messageId: `${tag()}@mail.customer.test`, inReplyTo: ours, references: [ours] });
      expect(await h.poll(ws.tenantId)).toMatchObject({ fetched: 1, ingested: 1 });
      expect(await h.count('tickets', ws.tenantId)).toBe(1);
      const t = await ticketDetail(ctx, ws, mail.ticketId);
      expect(t.events.filter((e) => e.kind === 'inbound_email').map((e) => e.body)).toEqual(['Where is my parcel?', 'Thanks!']);
    });

    test('In-Reply-To and References carry the customer\'s Message-ID exactly as written (its case kept)', async () => {
      const messageId = `CAJ${tag()}+Qx=Ab@Mail.Gmail.Com`;
      const t = await h.emailTicket(ws, p, mailbox, { messageId });
      const before = double.sent(p, mailbox).length;
      const { eventId } = await h.reply(ws, t.ticketId, 'Looking into it.');
      await eventually(async () => ((await h.outbound(ws.tenantId, eventId))?.state === 'sent' ? true : undefined), 10_000, 'the reply to be sent');
      const m = double.sent(p, mailbox)[before]!;
      expect(m.headers['in-reply-to']).toBe(`<${messageId}>`);
      expect(m.headers.references?.split(/\s+/)).toContain(`<${messageId}>`);
    });
  });

  describe('what the workers did, seen from outside', () => {
    test.each(PROVIDERS)('%s: five scheduled sweeps at once and an admin\'s refresh ask the provider once; every check it makes carries that one check\'s time', async (p) => {
      const ws = await createWorkspace(ctx);
      await h.connect(ws, p);
      const stale = new Date(Date.now() - 2 * ctx.config.MAILBOX_REFRESH_SECONDS * 1000);
      await ctx.db.updateTable('mailboxes').set({ last_checked_at: stale }).where('tenant_id', '=', ws.tenantId).execute();
      const mark = double.requests.length;
      // "At once" made deterministic: the workers hold off until the admin's refresh and all five sweeps have
      // asked (a check finishing before the admin even asks would rightly not answer the admin's ask).
      const q = ctx.runtime.queues.queue('mailbox');
      await q.pause();
      const refreshing = h.refreshOk(ws);
      await eventually(async () => ((await q.getJob(`refresh-${ws.tenantId}`)) ? true : undefined), 10_000, 'the admin\'s refresh to be queued');
      await Promise.all(Array.from({ length: 5 }, () => ctx.services.mailbox.sweep()));
      await q.resume();
      const refreshed = await refreshing;
      expect(refreshed.connected).toBe(true);
      await eventually(async () => {
        const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        return Object.values(c).every((n) => n === 0) ? true : undefined;
      }, 10_000, 'the mailbox queue to drain');
      // Each check refreshes the token first (that is where the provider says which scopes it grants now).
      expect(tokenCalls(mark, p)).toHaveLength(1);
      const s = await h.statusOk(ws);
      // inbound_polling is the last poll's own result, kept by a refresh; every other check is the refresh's.
      const times = new Set(s.checks.filter((c) => c.check !== 'inbound_polling').map((c) => c.last_checked_at));
      expect(times.size).toBe(1);
      expect(new Date([...times][0]!).getTime()).toBeGreaterThan(stale.getTime());
      // A sweep right after finds nothing due and asks nothing.
      await ctx.services.mailbox.sweep();
      await new Promise((r) => setTimeout(r, 300));
      expect(tokenCalls(mark, p)).toHaveLength(1);
    });

    test.each(PROVIDERS)('%s: a reply sent while the provider is down is retried with backoff by the worker, and the ticket says so before it is sent', async (p) => {
      const ws = await createWorkspace(ctx);
      const { email: mailbox } = await h.connect(ws, p);
      const mail = await h.emailTicket(ws, p, mailbox);
      double.setDown(p, true);
      let eventId: string;
      try {
        ({ eventId } = await h.reply(ws, mail.ticketId, 'Sent once the provider is back.'));
        await eventually(async () => ((await h.deliveries(ws, mail.ticketId)).some((d) => d.meta.state === 'retrying') ? true : undefined), 10_000, 'a retrying delivery event');
        expect(double.sent(p, mailbox)).toEqual([]);
      } finally {
        double.setDown(p, false);
      }
      const row = await eventually(async () => {
        const o = await h.outbound(ws.tenantId, eventId);
        return o?.state === 'sent' ? o : undefined;
      }, 20_000, 'the retried reply to be sent');
      expect(row.attempts).toBeGreaterThanOrEqual(2);
      const states = (await h.deliveries(ws, mail.ticketId)).map((d) => d.meta.state);
      expect(states.at(-1)).toBe('sent');
      expect(states.slice(0, -1).every((st) => st === 'retrying')).toBe(true);
      expect(double.sent(p, mailbox)).toHaveLength(1);
    });
  });

  describe.each(PROVIDERS)('%s replies join the customer\'s conversation in the mailbox', (p) => {
    let ws: Workspace;
    let mailbox: string;
    beforeAll(async () => {
      ws = await createWorkspace(ctx);
      mailbox = (await h.connect(ws, p)).email;
    });
    const sentReply = async (ticketId: string, body: string) => {
      const before = double.sent(p, mailbox).length;
      const { eventId } = await h.reply(ws, ticketId, body);
      await eventually(async () => ((await h.outbound(ws.tenantId, eventId))?.state === 'sent' ? true : undefined), 10_000, 'the reply to be sent');
      const all = double.sent(p, mailbox);
      expect(all).toHaveLength(before + 1);
      return { eventId, sent: all[before]! };
    };

    test(p === 'google'
      ? 'the reply names the polled message\'s Gmail threadId and is filed in the customer\'s thread; the delivery event says which thread'
      : 'the reply goes through the polled message\'s reply endpoint and is filed in its conversation; the delivery event says which conversation', async () => {
      const mail = await h.emailTicket(ws, p, mailbox);
      const thread = double.threadOf(p, mailbox, mail.providerId)!;
      expect(thread).toEqual(expect.any(String));
      const { sent } = await sentReply(mail.ticketId, 'Found it, shipping today.');
      if (p === 'google') {
        expect(sent.threadId).toBe(thread);
      } else {
        expect(sent.repliedTo).toBe(mail.providerId);
        expect(sent.conversationId).toBe(thread);
      }
      expect(sent.headers['in-reply-to']).toBe(`<${mail.messageId}>`);
      const deliveries = await h.deliveries(ws, mail.ticketId);
      expect(deliveries.at(-1)!.meta).toMatchObject({ state: 'sent', provider_thread_id: thread });
    });

    test('the reply answers the customer\'s latest message under the customer\'s own subject, even when the ticket\'s subject differs', async () => {
      const mail = await h.emailTicket(ws, p, mailbox);
      await ctx.db.updateTable('tickets').set({ subject: 'Renamed by the team' }).where('tenant_id', '=', ws.tenantId).where('id', '=', mail.ticketId).execute();
      const followUpId = `${tag()}@mail.customer.test`;
      const followUp = double.deliver(p, mailbox, { from: mail.customer, subject: `Re: ${mail.subject}`, text: 'Any news?', messageId: followUpId, inReplyTo: mail.messageId, references: [mail.messageId] });
      expect(await h.poll(ws.tenantId)).toMatchObject({ ingested: 1 });
      const { sent } = await sentReply(mail.ticketId, 'Still looking.');
      expect(sent.headers.subject).toBe(`Re: ${mail.subject}`);
      expect(sent.headers['in-reply-to']).toBe(`<${followUpId}>`);
      if (p === 'google') expect(sent.threadId).toBe(double.threadOf(p, mailbox, mail.providerId));
      else expect(sent.repliedTo).toBe(followUp);
    });

    test('a ticket whose email was pushed to the ingest route (never polled) is answered by headers alone, as a new message', async () => {
      if (!(await h.row(ws.tenantId))?.inbound_cursor) await h.poll(ws.tenantId);
      const messageId = `${tag()}@mail.customer.test`;
      const res = await ingest(ctx, 'email', emailPayload({ from: `pushed.${tag()}@customer.test`, subject: 'Pushed, not polled', text: 'Hello?', messageId }), ws.tenantId);
      expect(res.status).toBe(200);
      const { sent } = await sentReply(res.body.ticket_id, 'Hello back.');
      expect(sent.headers['in-reply-to']).toBe(`<${messageId}>`);
      if (p === 'google') expect(double.threadOf(p, mailbox, sent.threadId!)).toBe(sent.threadId);
      else expect(sent.repliedTo).toBeUndefined();
    });

    test('when the customer\'s message was deleted from the mailbox after polling, the reply still goes out, threaded by its headers', async () => {
      const mail = await h.emailTicket(ws, p, mailbox);
      double.remove(p, mailbox, mail.providerId);
      const { eventId, sent } = await sentReply(mail.ticketId, 'Replying anyway.');
      expect(sent.headers['in-reply-to']).toBe(`<${mail.messageId}>`);
      if (p === 'microsoft') expect(sent.repliedTo).toBeUndefined();
      expect(await h.outbound(ws.tenantId, eventId)).toMatchObject({ state: 'sent', attempts: 1 });
    });
  });
});
