/**
 * Behind PgBouncer in transaction mode (issue 20): DATABASE_POOL_MODE=transaction sends no startup parameter
 * (PgBouncer refuses statement_timeout as one), takes the statement timeout from the database's own default
 * (applyDatabaseDefaults, run by `npm run migrate`), keeps no session state across transactions, and LISTENs on
 * the direct DATABASE_LISTEN_URL. The app, its workers and a webhook receiver run a cross-section of the
 * service through a real PgBouncer (Debian's package, installed by the test preparation) of the suite's own.
 */
import { Client } from 'pg';
import { loadConfig } from '../src/config';
import { applyDatabaseDefaults } from '../src/db';
import { sql } from 'kysely';
import { startTestApp, type TestContext } from './helpers/context';
import { serverUrl } from './helpers/db-names';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { smsPayload } from './helpers/payloads';
import { PGBOUNCER, startPgBouncer, type OwnPgBouncer } from './helpers/pgbouncer';
import { createTicket } from './helpers/tickets';
import { eventually } from './helpers/wait';
import { startReceiver } from './helpers/webhook-receiver';

const available = PGBOUNCER !== null;
if (!available) console.warn('pgbouncer is not installed (needs root and apt-get): the PgBouncer suite is SKIPPED');
const maybe = available ? describe : describe.skip;

maybe('through PgBouncer in transaction mode', () => {
  let bouncer: OwnPgBouncer;
  let direct: TestContext;
  let ctx: TestContext;
  let ws: Workspace;
  const receivers: { stop(): Promise<void> }[] = [];

  beforeAll(async () => {
    bouncer = await startPgBouncer();
    // The database (cloned from the run's template) is made directly; the app under test reaches it only
    // through the pooler, LISTEN aside.
    direct = await startTestApp();
    // What `npm run migrate` does in this mode, before the app starts: server sessions the pooler opens from
    // now on get the timeout (it keeps the ones it holds until it reconnects them).
    await applyDatabaseDefaults(direct.db, { PG_STATEMENT_TIMEOUT_MS: 7000, DATABASE_POOL_MODE: 'transaction' });
    ctx = await startTestApp({
      database: false,
      env: {
        DATABASE_URL: bouncer.url(direct.databaseName!),
        DATABASE_POOL_MODE: 'transaction',
        DATABASE_LISTEN_URL: serverUrl(direct.databaseName!),
        PG_STATEMENT_TIMEOUT_MS: '7000',
        OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
      },
    });
    await ctx.startWorkers();
    ws = await createWorkspace(ctx);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.stop().catch(() => {})));
    await ctx?.close();
    await direct?.close();
    await bouncer?.stop();
  });

  test('PgBouncer refuses statement_timeout as a startup parameter, which is why this mode sends none', async () => {
    const c = new Client({ connectionString: bouncer.url(direct.databaseName!), statement_timeout: 5000 });
    await expect(c.connect()).rejects.toThrow(/unsupported startup parameter/i);
    await c.end().catch(() => {});
  });

  test('the statement timeout still holds: it is the database default, seen through the pooler', async () => {
    const { rows } = await sql<{ statement_timeout: string }>`SHOW statement_timeout`.execute(ctx.db);
    expect(rows[0]!.statement_timeout).toBe('7s');
  });

  test('tickets, intake, the event log and an outbound webhook all work through the pooler', async () => {
    const rx = await startReceiver();
    receivers.push(rx);
    await ctx.http.post('/v1/webhook-endpoints').set(bearer(ws.ownerKey)).send({ url: rx.url, event_types: ['ticket.created', 'ticket.updated'] }).expect(201);
    const t = (await createTicket(ctx, ws, { subject: 'Through the pooler' })) as { id: string };
    const patched = await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ tags: ['pooled'] });
    expect(patched.status).toBe(200);
    await ctx.http.put('/v1/channels/sms').set(bearer(ws.ownerKey)).send({ config: {} }).expect(200);
    const ingested = await ctx.http.post('/v1/ingest/sms').send({ tenant_id: ws.tenantId, payload: smsPayload({}) });
    expect(ingested.status).toBe(200);
    const log = (await ctx.http.get('/v1/events').set(bearer(ws.ownerKey)).expect(200)).body.events as { type: string }[];
    expect(log.map((e) => e.type)).toEqual(expect.arrayContaining(['ticket.created', 'ticket.updated', 'message.created']));
    // The sender was woken by the commit's NOTIFY on the direct LISTEN connection.
    await eventually(async () => (rx.received.length >= 2 ? true : undefined), 10_000, 'both ticket events at the receiver');
    expect(rx.received.map((r) => r.event.type)).toEqual(expect.arrayContaining(['ticket.created', 'ticket.updated']));
  });

  test('transaction mode without a direct LISTEN connection is refused at start', () => {
    expect(() => loadConfig({ DATABASE_POOL_MODE: 'transaction' })).toThrow(/DATABASE_LISTEN_URL/);
    expect(loadConfig({ DATABASE_POOL_MODE: 'transaction', DATABASE_LISTEN_URL: 'postgres://db:5432/helpdesk' }).DATABASE_POOL_MODE).toBe('transaction');
  });
});
