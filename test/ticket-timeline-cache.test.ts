import supertest from 'supertest';
import { sql } from 'kysely';
import { createApp } from '../src/app';
import { createLogger } from '../src/lib/logger';
import { newId } from '../src/lib/ids';
import { type TestContext } from './helpers/context';
import { bearer, createWorkspace } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

/**
 * GET /v1/tickets/{id} keeps each ticket's rendered timeline per API process, used only while the ticket is
 * at the version it was rendered at (checked in the statement that reads the ticket).
 */
/** Another API process over the same database and Redis (its own services, so its own kept timelines). */
let other: ReturnType<typeof supertest>;
/** An API process that keeps no timelines. */
let keepsNone: ReturnType<typeof supertest>;

function appWith(config: TestContext['config']) {
  const { app } = createApp({ config, logger: createLogger(config, ctx.logs), db: ctx.db, redis: ctx.runtime.redis, queues: ctx.runtime.queues, bus: ctx.runtime.bus });
  return supertest(app);
}

const { ctx, ws } = useTestApp({ workspaces: 1 });
beforeAll(async () => {
  other = appWith(ctx.config);
  keepsNone = appWith({ ...ctx.config, TICKET_TIMELINE_CACHE_MB: 0 });
});

/** A timeline event written behind the service's back: the ticket's row (and so its version) is not touched. */
async function insertEventWithoutVersion(tenantId: string, ticketId: string, body: string) {
  await ctx.db
    .insertInto('ticket_events')
    .values({ id: newId(), tenant_id: tenantId, ticket_id: ticketId, kind: 'internal_note', body, meta: '{}', actor_type: 'system', actor_user_id: null, actor_name: null })
    .execute();
}

const get = (http: ReturnType<typeof supertest>, id: string) => http.get(`/v1/tickets/${id}`).set(bearer(ws.ownerKey));

describe('GET /v1/tickets/{id}: rendered timelines kept per version', () => {
  test('answers the timeline it rendered while the ticket stays at that version, and reads it again once the version moves', async () => {
    const t = await createTicket(ctx, ws);
    const first = await get(ctx.http, t.id);
    expect(first.status).toBe(200);
    expect(first.body.events).toHaveLength(1);

    await insertEventWithoutVersion(ws.tenantId, t.id, 'written without a version bump');
    const kept = await get(ctx.http, t.id);
    expect(kept.body.events).toHaveLength(1);
    expect(kept.headers.etag).toBe(first.headers.etag);
    // A process that keeps nothing reads it (so the one above really answered from what it kept).
    expect((await get(keepsNone, t.id)).body.events).toHaveLength(2);

    await sql`UPDATE tickets SET version = version WHERE tenant_id = ${ws.tenantId} AND id = ${t.id}`.execute(ctx.db);
    const moved = await get(ctx.http, t.id);
    expect(moved.body.events.map((e: { body: string }) => e.body)).toEqual(['It is on fire.', 'written without a version bump']);
    expect(moved.headers.etag).not.toBe(first.headers.etag);
  });

  test('a reply through another API process shows on this one on the very next read', async () => {
    const t = await createTicket(ctx, ws);
    expect((await get(ctx.http, t.id)).body.events).toHaveLength(1);
    const reply = await other.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'On our way.' });
    expect(reply.status).toBe(201);
    const after = await get(ctx.http, t.id);
    expect(after.body.events.map((e: { kind: string }) => e.kind)).toEqual(['ticket_created', 'reply']);
    expect(after.body.status).toBe(reply.body.status);
  });

  test('answers exactly what a process that keeps nothing answers, as JSON, with the ETag, and 304 to it', async () => {
    const t = await createTicket(ctx, ws, { tags: ['vip'], metadata: { events: [], note: '"events":[]' } });
    await other.post(`/v1/tickets/${t.id}/notes`).set(bearer(ws.ownerKey)).send({ body: 'Ünïcödé ✓ "quoted" \\ note' });
    await get(ctx.http, t.id);
    const kept = await get(ctx.http, t.id);
    const fresh = await get(keepsNone, t.id);
    expect(kept.status).toBe(200);
    expect(kept.headers['content-type']).toMatch(/^application\/json/);
    expect(kept.text).toBe(fresh.text);
    expect(kept.body.metadata).toEqual({ events: [], note: '"events":[]' });
    expect(kept.body.events.at(-1).body).toBe('Ünïcödé ✓ "quoted" \\ note');
    expect(kept.headers.etag).toBe(fresh.headers.etag);
    const notModified = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).set('If-None-Match', kept.headers.etag!);
    expect(notModified.status).toBe(304);
  });

  test("another workspace's read of a kept ticket is 404", async () => {
    const t = await createTicket(ctx, ws);
    await get(ctx.http, t.id);
    const stranger = await createWorkspace(ctx);
    const res = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(stranger.ownerKey));
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
  });
});
