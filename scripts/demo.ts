/**
 * npm run -s demo [-- --workspace "Northwind Demo"]
 * Fills a new workspace with a realistic first day: customers writing in over SMS, web chat and email (through
 * the real ingest worker code), tickets opened by agents, replies and notes, a team, a Zendesk integration with
 * webhook deliveries, time logged, todos and satisfaction ratings, so the queue dashboard, the transcripts and
 * the rollups show something on a first run. Needs PostgreSQL and Redis (as `npm run up` starts them). Prints
 * one JSON object: the workspace, the owner key, and what was made.
 */
import { createHash, randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadConfigOrExit } from '../src/config';
import { migrateToLatest } from '../src/db';
import { ensureDatabase } from '../src/db/admin';
import type { IngestItem } from '../src/domains/ingest/worker';
import type { WebhookItem } from '../src/domains/webhooks/worker';
import { createLogger } from '../src/lib/logger';
import { openRuntime } from '../src/runtime';
import { createApiServices } from '../src/services/api';
import { createWorkerServices } from '../src/services/worker';

const CUSTOMERS = [
  { name: 'Maria Gonzales', email: 'maria.gonzales@example.com', phone: '+14155550111' },
  { name: 'Kenji Watanabe', email: 'kenji.w@example.jp', phone: '+14155550112' },
  { name: 'Amara Okafor', email: 'amara.okafor@example.ng', phone: '+14155550113' },
  { name: 'Lukas Becker', email: 'lukas.becker@example.de', phone: '+14155550114' },
  { name: 'Priya Raman', email: 'priya.raman@example.in', phone: '+14155550115' },
  { name: 'Sofia Rossi', email: 'sofia.rossi@example.it', phone: '+14155550116' },
];

const ASKS = [
  ['Where is my order #10482?', 'It was due on Monday and the tracking page has not moved since Friday.'],
  ['Charged twice for invoice 2291', 'My card shows two charges of $48.20 from this morning.'],
  ['Cannot sign in after the update', 'The app says my password is wrong, but it works on the website.'],
  ['Do you ship to Canada?', 'I would like to order the blue kettle for a friend in Toronto.'],
  ['Refund for a damaged parcel', 'The box arrived crushed and the lamp inside is broken. Photos attached.'],
  ['Change my delivery address', 'I moved last week; can the next shipment go to my new flat?'],
];

const hex = (n: number) => randomBytes(n).toString('hex');

async function main() {
  const { values } = parseArgs({ options: { workspace: { type: 'string' } } });
  const config = loadConfigOrExit();
  await ensureDatabase(config.DATABASE_URL);
  const logger = createLogger({ ...config, LOG_LEVEL: 'warn' });
  const runtime = openRuntime(config, logger, 'worker');
  try {
    await migrateToLatest(runtime.db.db);
    // What an admin does goes through the API's container; what customers and integrations send, through the
    // workers' writers (their own code paths), as if it had just been delivered.
    const services = createApiServices({ db: runtime.db.db, config, queues: runtime.queues, logger, redis: runtime.redis, bus: runtime.bus });
    const workers = createWorkerServices({ db: runtime.db.db, config, queues: runtime.queues, logger, redis: runtime.redis });
    const ws = await services.workspaces.bootstrap({
      workspace: values.workspace ?? `Northwind Demo ${hex(2)}`,
      ownerEmail: `owner+${hex(3)}@northwind.example`,
      ownerName: 'Olive Owner',
    });
    const owner = await services.identity.authenticate(`Bearer ${ws.api_key.secret}`);
    const tenantId = ws.tenant_id;

    const team = await services.teams.create(owner, { name: 'Front line' });
    await services.teams.addMember(owner, team.id, owner.userId);
    for (const channel of ['sms', 'web_chat', 'email']) await services.channels.upsert(owner, channel, { config: {} } as never);

    // Customers write in: the worker's own code path, as if their messages had just been delivered.
    const items: IngestItem[] = CUSTOMERS.flatMap((c, i) => {
      const [subject, body] = ASKS[i % ASKS.length]! as [string, string];
      const sms: IngestItem = { id: `demo-${hex(6)}`, tenant_id: tenantId, channel: 'sms', message: { providerMessageId: `SM${hex(16)}`, sender: { handle: c.phone, name: c.name }, conversationKey: `${c.phone}|+14155550100`, body } };
      const chat: IngestItem = { id: `demo-${hex(6)}`, tenant_id: tenantId, channel: 'web_chat', message: { providerMessageId: `wc_${hex(8)}`, sender: { handle: `v_${hex(5)}`, name: c.name, email: c.email }, conversationKey: `chat-${hex(4)}`, body: `${subject} ${body}` } };
      const messageId = `<${hex(8)}@mail.example.com>`;
      const email: IngestItem = { id: `demo-${hex(6)}`, tenant_id: tenantId, channel: 'email', message: { providerMessageId: messageId, messageIdHeader: messageId, sender: { handle: c.email, name: c.name, email: c.email }, subject, body } };
      return i % 3 === 0 ? [sms] : i % 3 === 1 ? [chat] : [email];
    });
    const ingested = await workers.ingestProcessor.processBatch(items);
    const ticketIds = ingested.filter((r) => r.ok).map((r) => (r.value as { ticket_id: string }).ticket_id);

    // Agents open a few themselves, answer, note, solve some.
    for (const [i, c] of CUSTOMERS.slice(0, 4).entries()) {
      const [subject, description] = ASKS[(i + 2) % ASKS.length]!;
      const t = await services.tickets.create(owner, { subject, description, customer_email: c.email, priority: i === 0 ? 'high' : 'normal', source: 'phone', tags: ['demo'], metadata: {} } as never);
      ticketIds.push(t.id);
    }
    for (const [i, id] of ticketIds.entries()) {
      await services.tickets.reply(owner, id, 'Thanks for writing in — I am looking into this now and will update you shortly.');
      if (i % 2 === 0) await services.tickets.note(owner, id, 'Checked the order history; carrier delay on their side.');
      await services.work.addTimeEntry(owner, id, { minutes: 5 + ((i * 7) % 40), billable: i % 3 !== 0 });
      if (i % 3 === 0) await services.work.addTodo(owner, id, { title: 'Follow up with the carrier' });
      if (i % 2 === 1) {
        await services.tickets.patch(owner, id, { status: 'solved', assignee_id: owner.userId });
        await services.work.addCsat(owner, id, { score: 3 + (i % 3), comment: i % 4 === 1 ? 'Quick and friendly, thank you!' : '' });
      }
    }

    // Another helpdesk posting to us: a Zendesk integration and three of its ticket events.
    const integration = await services.webhooks.createIntegration(owner, { provider: 'zendesk', name: 'Zendesk (legacy)', signing_secret: hex(16) });
    const deliveries: WebhookItem[] = ['created', 'status_changed', 'comment_added'].map((kind, i) => {
      const raw = JSON.stringify({ type: `zen:event-type:ticket.${kind}`, id: `demo-${hex(8)}`, subject: 'zen:ticket:5158', detail: { id: '5158', status: i === 1 ? 'PENDING' : 'OPEN', subject: 'Printer on floor 3 jammed' } });
      return {
        id: `demo-${hex(6)}`,
        tenant_id: tenantId,
        integration_id: integration.id,
        dedupe_key: createHash('sha256').update(raw).digest('hex'),
        provider_event_id: null,
        external_ticket_id: '5158',
        type: `zen:event-type:ticket.${kind}`,
        occurred_at: new Date(Date.now() - (3 - i) * 3600_000).toISOString(),
        status: i === 1 ? 'pending' : 'open',
        subject: 'Printer on floor 3 jammed',
        priority: 'normal',
        requester: 'facilities@northwind.example',
        raw,
      };
    });
    await workers.webhookProcessor.processBatch(deliveries);
    await workers.rollups.sweep();

    process.stdout.write(
      `${JSON.stringify({
        tenant_id: tenantId,
        api_key: ws.api_key,
        made: { tickets: ticketIds.length, customers: CUSTOMERS.length, channels: 3, integration_id: integration.id, webhook_events: deliveries.length },
      })}\n`,
    );
  } finally {
    await runtime.close();
  }
}

main().catch((err) => {
  process.stderr.write(`demo failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
