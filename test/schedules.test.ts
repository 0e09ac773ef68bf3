/**
 * Schedules (issue 37): the API (reads for anyone in the workspace, writes for admins, versions and If-Match, the
 * edge's refusals), iCal holiday feeds read by the workers from a feed double (a good feed, a malformed one, one too
 * large, one that never finishes), and the recompute a schedule change queues: one job moving 2,000 open tickets'
 * due times in batches, leaving a ticket solved while its batch waited and the calendar policies' tickets alone.
 */
import { Job } from 'bullmq';
import { sql } from 'kysely';
import { Client } from 'pg';
import { section } from '../src/config';
import { addBusinessMinutes, compileSchedule, type MinuteInterval } from '../src/domains/schedules/business-time';
import { createScheduleFeeds } from '../src/domains/schedules/refresh';
import { createLogger } from '../src/lib/logger';
import { addMember, bearer, type Workspace } from './helpers/factories';
import { icsFeed, startIcalFeed, type IcalFeed } from './helpers/ical-feed';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';
import { eventually } from './helpers/wait';
import type { TestContext } from './helpers/context';

const OFFICE = { start: '09:00', end: '17:00' };
const WEEKDAYS_9_TO_5 = { mon: [OFFICE], tue: [OFFICE], wed: [OFFICE], thu: [OFFICE], fri: [OFFICE] };
const MINUTES_9_TO_5: MinuteInterval[][] = [0, 1, 2, 3, 4, 5, 6].map((d) => (d < 5 ? [[540, 1020]] : []));
const uniform = (first: number, resolution: number, next?: number) => {
  const t = { first_response_minutes: first, resolution_minutes: resolution, ...(next ? { next_reply_minutes: next } : {}) };
  return { low: t, normal: t, high: t, urgent: t };
};

interface ScheduleView {
  id: string;
  name: string;
  time_zone: string;
  weekly_hours: Record<string, { start: string; end: string }[]>;
  holidays: string[];
  ical_url: string | null;
  ical_holidays: string[];
  ical_fetched_at: string | null;
  ical_error: string | null;
  version: string;
}

function api(get: () => TestContext) {
  return {
    async create(ws: Workspace, body: Record<string, unknown>): Promise<ScheduleView> {
      const res = await get().http.post('/v1/schedules').set(bearer(ws.ownerKey)).send(body);
      if (res.status !== 201) throw new Error(`create schedule: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as ScheduleView;
    },
    async policy(ws: Workspace, body: Record<string, unknown>): Promise<{ id: string }> {
      const res = await get().http.post('/v1/sla-policies').set(bearer(ws.ownerKey)).send(body);
      if (res.status !== 201) throw new Error(`create policy: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as { id: string };
    },
    row: (id: string) => get().db.selectFrom('tickets').selectAll().where('id', '=', id).executeTakeFirstOrThrow(),
  };
}

describe('schedules through the API', () => {
  const { ctx, ws } = useTestApp({ workspaces: 1, env: { SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK: 'true' } });
  const h = api(() => ctx);

  test('an admin creates a schedule and anyone in the workspace reads it, with its version as a strong ETag; a viewer cannot write', async () => {
    const res = await ctx.http
      .post('/v1/schedules')
      .set(bearer(ws.ownerKey))
      .send({
        name: 'Berlin desk',
        time_zone: 'Europe/Berlin',
        weekly_hours: { ...WEEKDAYS_9_TO_5, fri: [{ start: '09:00', end: '12:30' }, { start: '13:30', end: '16:00' }], sat: [{ start: '22:00', end: '24:00' }] },
        holidays: ['2025-12-26', '2025-12-25', '2025-12-26'],
      });
    expect(res.status).toBe(201);
    expect(res.headers.etag).toBe('"1"');
    const made = res.body as ScheduleView;
    expect(made).toMatchObject({
      name: 'Berlin desk',
      time_zone: 'Europe/Berlin',
      // Every day named, closed ones as []; holidays once each, in order.
      weekly_hours: { ...WEEKDAYS_9_TO_5, fri: [{ start: '09:00', end: '12:30' }, { start: '13:30', end: '16:00' }], sat: [{ start: '22:00', end: '24:00' }], sun: [] },
      holidays: ['2025-12-25', '2025-12-26'],
      ical_url: null,
      ical_holidays: [],
      ical_fetched_at: null,
      ical_error: null,
      version: '1',
    });

    const viewer = await addMember(ctx, ws, 'viewer');
    const read = await ctx.http.get(`/v1/schedules/${made.id}`).set(bearer(viewer.token));
    expect(read.status).toBe(200);
    expect(read.body).toEqual(made);
    expect((await ctx.http.get(`/v1/schedules/${made.id}`).set(bearer(viewer.token)).set('If-None-Match', '"1"')).status).toBe(304);
    expect((await ctx.http.get('/v1/schedules').set(bearer(viewer.token))).body.schedules.map((s: ScheduleView) => s.id)).toContain(made.id);

    const refused = await ctx.http.post('/v1/schedules').set(bearer(viewer.token)).send({ name: 'x', time_zone: 'UTC', weekly_hours: WEEKDAYS_9_TO_5 });
    expect([refused.status, refused.body.code]).toEqual([403, 'insufficient_role']);
    const editor = await addMember(ctx, ws, 'editor');
    expect((await ctx.http.patch(`/v1/schedules/${made.id}`).set(bearer(editor.token)).send({ name: 'y' })).status).toBe(403);
  });

  test.each([
    ['overlapping intervals', { weekly_hours: { mon: [{ start: '09:00', end: '13:00' }, { start: '12:00', end: '17:00' }] } }, 'body.weekly_hours.mon'],
    ['intervals out of order', { weekly_hours: { tue: [{ start: '13:00', end: '17:00' }, { start: '09:00', end: '12:00' }] } }, 'body.weekly_hours.tue'],
    ['an interval ending before it starts', { weekly_hours: { wed: [{ start: '17:00', end: '09:00' }] } }, 'body.weekly_hours.wed'],
    ['no hours at all', { weekly_hours: { sat: [] } }, 'body.weekly_hours.mon'],
    ['a time past 24:00', { weekly_hours: { mon: [{ start: '09:00', end: '24:30' }] } }, 'body.weekly_hours.mon.0.end'],
    ['an unknown time zone', { time_zone: 'Europe/Atlantis' }, 'body.time_zone'],
    ['a date that does not exist', { holidays: ['2025-02-30'] }, 'body.holidays.0'],
  ])('%s is refused at the edge (400 validation_failed naming the field)', async (_, change, path) => {
    const res = await ctx.http
      .post('/v1/schedules')
      .set(bearer(ws.ownerKey))
      .send({ name: 'Bad', time_zone: 'UTC', weekly_hours: WEEKDAYS_9_TO_5, ...change });
    expect([res.status, res.body.code]).toEqual([400, 'validation_failed']);
    expect(res.body.errors.map((e: { path: string }) => e.path)).toContain(path);
  });

  test('PATCH replaces what it names, and a stale If-Match is 412 with nothing written', async () => {
    const s = await h.create(ws, { name: 'Patch me', time_zone: 'UTC', weekly_hours: WEEKDAYS_9_TO_5 });
    const res = await ctx.http.patch(`/v1/schedules/${s.id}`).set(bearer(ws.ownerKey)).set('If-Match', '"1"').send({ holidays: ['2026-01-01'], time_zone: 'America/New_York' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ holidays: ['2026-01-01'], time_zone: 'America/New_York', version: '2', weekly_hours: { ...WEEKDAYS_9_TO_5, sat: [], sun: [] } });
    expect(res.headers.etag).toBe('"2"');
    const stale = await ctx.http.patch(`/v1/schedules/${s.id}`).set(bearer(ws.ownerKey)).set('If-Match', '"1"').send({ name: 'Lost update' });
    expect([stale.status, stale.body.code]).toEqual([412, 'precondition_failed']);
    expect((await ctx.http.get(`/v1/schedules/${s.id}`).set(bearer(ws.ownerKey))).body.name).toBe('Patch me');
  });

  test('a policy names a schedule: unknown is 422, targets it cannot meet within ten years are 422, and while named it cannot be deleted', async () => {
    const unknown = await ctx.http.post('/v1/sla-policies').set(bearer(ws.ownerKey)).send({ name: 'P', targets: uniform(60, 480), schedule_id: '6f1d2c3b-4a5e-4f60-9b7c-8d9e0a1b2c3d' });
    expect([unknown.status, unknown.body.code]).toEqual([422, 'schedule_unknown']);

    const hourAWeek = await h.create(ws, { name: 'An hour a week', time_zone: 'UTC', weekly_hours: { mon: [{ start: '09:00', end: '10:00' }] } });
    const tooLong = await ctx.http.post('/v1/sla-policies').set(bearer(ws.ownerKey)).send({ name: 'Year', targets: uniform(60, 525_600), schedule_id: hourAWeek.id });
    expect([tooLong.status, tooLong.body.code]).toEqual([422, 'sla_target_unreachable']);

    const office = await h.create(ws, { name: 'Office', time_zone: 'Europe/Berlin', weekly_hours: WEEKDAYS_9_TO_5 });
    const policy = await h.policy(ws, { name: 'Business hours', targets: uniform(60, 480 * 100), schedule_id: office.id });
    expect(policy).toMatchObject({ schedule_id: office.id });
    // Hours cut to an hour a week would leave the policy's 48,000 minutes unreachable: refused, nothing written.
    const cut = await ctx.http.patch(`/v1/schedules/${office.id}`).set(bearer(ws.ownerKey)).send({ weekly_hours: { mon: [{ start: '09:00', end: '10:00' }] } });
    expect([cut.status, cut.body.code]).toEqual([422, 'sla_target_unreachable']);
    expect((await ctx.http.get(`/v1/schedules/${office.id}`).set(bearer(ws.ownerKey))).body.version).toBe('1');

    const inUse = await ctx.http.delete(`/v1/schedules/${office.id}`).set(bearer(ws.ownerKey));
    expect([inUse.status, inUse.body.code]).toEqual([409, 'schedule_in_use']);
    expect(inUse.body.detail).toContain('Business hours');
    expect((await ctx.http.delete(`/v1/schedules/${hourAWeek.id}`).set(bearer(ws.ownerKey))).status).toBe(204);
    expect((await ctx.http.get(`/v1/schedules/${hourAWeek.id}`).set(bearer(ws.ownerKey))).status).toBe(404);
  });

  test('an iCal URL must be https (webcal), or http on loopback where allowed; refused addresses are 422 ical_url_refused', async () => {
    for (const url of ['http://calendar.example.com/h.ics', 'https://10.1.2.3/h.ics', 'https://169.254.169.254/latest']) {
      const res = await ctx.http.post('/v1/schedules').set(bearer(ws.ownerKey)).send({ name: 'Feed', time_zone: 'UTC', weekly_hours: WEEKDAYS_9_TO_5, ical_url: url });
      expect([url, res.status, res.body.code]).toEqual([url, 422, 'ical_url_refused']);
    }
    const ok = await h.create(ws, { name: 'Feed', time_zone: 'UTC', weekly_hours: WEEKDAYS_9_TO_5, ical_url: 'webcal://calendar.example.com/h.ics' });
    expect(ok.ical_url).toBe('webcal://calendar.example.com/h.ics');
    // Setting a feed queues its first read (the workers are not running here: the job waits).
    const job = await Job.fromId(ctx.runtime.queues.queue('maintenance'), `schedule-ical-${ok.id}`);
    expect(job?.name).toBe('schedules.ical_refresh');
  });
});

describe('iCal holiday feeds, read by the workers', () => {
  let feed: IcalFeed;
  const { ctx, ws } = useTestApp({
    workspaces: 1,
    env: { SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK: 'true', SCHEDULE_ICAL_TIMEOUT_MS: '700', SCHEDULE_ICAL_MAX_BYTES: '65536' },
    setup: async () => {
      feed = await startIcalFeed();
    },
    teardown: () => feed.close(),
  });
  const h = api(() => ctx);
  const refresh = (s: ScheduleView) => ctx.workerServices.scheduleFeeds.refresh({ tenant_id: ws.tenantId, schedule_id: s.id });
  const read = async (s: ScheduleView) => (await ctx.http.get(`/v1/schedules/${s.id}`).set(bearer(ws.ownerKey))).body as ScheduleView;
  const year = new Date().getUTCFullYear();

  test('a good feed\'s all-day events become the schedule\'s imported holidays, and a change of them queues the recompute', async () => {
    // Christmas, two days, every year since last year's: read from a year back to three years ahead.
    feed.serve('/de.ics', { body: icsFeed([['UID:xmas', `DTSTART;VALUE=DATE:${year - 1}1225`, `DTEND;VALUE=DATE:${year - 1}1227`, 'RRULE:FREQ=YEARLY', 'SUMMARY:Christmas']]) });
    const s = await h.create(ws, { name: 'With feed', time_zone: 'Europe/Berlin', weekly_hours: WEEKDAYS_9_TO_5, ical_url: feed.url('/de.ics') });
    const first = await refresh(s);
    const after = await read(s);
    expect(first).toEqual({ read: true, dates: after.ical_holidays.length, changed: true });
    expect(after.ical_holidays.slice(0, 4)).toEqual([`${year - 1}-12-25`, `${year - 1}-12-26`, `${year}-12-25`, `${year}-12-26`]);
    expect(after.ical_holidays.length).toBeGreaterThanOrEqual(8);
    expect(after.ical_holidays.every((d) => /-12-2[56]$/.test(d))).toBe(true);
    expect(after.ical_error).toBeNull();
    expect(after.ical_fetched_at).not.toBeNull();
    expect(feed.requests.at(-1)!.headers.accept).toContain('text/calendar');
    const recompute = await Job.fromId(ctx.runtime.queues.queue('maintenance'), `schedule-recompute-${s.id}-${after.version}`);
    expect(recompute?.name).toBe('schedules.recompute');
    // The same dates again: read, nothing changed, nothing queued.
    expect(await refresh(s)).toEqual({ read: true, dates: after.ical_holidays.length, changed: false });
  });

  test.each([
    ['a malformed feed', { body: '<html>Calendar moved</html>' }, /not an iCalendar feed/],
    ['a feed larger than SCHEDULE_ICAL_MAX_BYTES', { size: 200_000 }, /larger than 65536 bytes/],
    ['a feed that never finishes', { hang: true as const }, /did not answer within 700 ms/],
    ['a feed answering 404', { body: 'gone', status: 404 }, /answered HTTP 404/],
  ])('%s fails the read with ical_error, and the holidays of the last good read stay', async (_, answer, error) => {
    const path = `/feed-${Math.random().toString(36).slice(2)}.ics`;
    feed.serve(path, { body: icsFeed([['UID:ny', `DTSTART;VALUE=DATE:${year + 1}0101`, 'SUMMARY:New Year']]) });
    const s = await h.create(ws, { name: 'Flaky feed', time_zone: 'UTC', weekly_hours: WEEKDAYS_9_TO_5, ical_url: feed.url(path) });
    await refresh(s);
    const good = await read(s);
    expect(good.ical_holidays).toEqual([`${year + 1}-01-01`]);

    feed.serve(path, answer);
    const started = Date.now();
    const outcome = await refresh(s);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(outcome).toEqual({ read: false, error: expect.stringMatching(error) });
    const after = await read(s);
    expect(after.ical_error).toMatch(error);
    expect(after.ical_holidays).toEqual([`${year + 1}-01-01`]);
    expect(after.ical_fetched_at).toBe(good.ical_fetched_at);
  });

  test('a feed whose host resolves to loopback is refused by the address guard where the deployment does not allow it', async () => {
    feed.serve('/guarded.ics', { body: icsFeed([]) });
    const url = feed.url('/guarded.ics').replace('127.0.0.1', 'localhost');
    const s = await h.create(ws, { name: 'Guarded', time_zone: 'UTC', weekly_hours: WEEKDAYS_9_TO_5, ical_url: url });
    const strict = createScheduleFeeds({
      db: ctx.db,
      queues: ctx.runtime.queues,
      logger: createLogger(ctx.config, ctx.logs),
      config: { ...section(ctx.config, 'schedules'), SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK: false },
    });
    const asked = feed.requests.length;
    expect(await strict.refresh({ tenant_id: ws.tenantId, schedule_id: s.id })).toEqual({ read: false, error: expect.stringMatching(/resolves to an address this deployment does not read from/) });
    expect(feed.requests.length).toBe(asked);
  });

  test('the daily sweep queues a read of every feed not read for a day', async () => {
    feed.serve('/stale.ics', { body: icsFeed([]) });
    const s = await h.create(ws, { name: 'Stale feed', time_zone: 'UTC', weekly_hours: WEEKDAYS_9_TO_5, ical_url: feed.url('/stale.ics') });
    await refresh(s);
    const queue = ctx.runtime.queues.queue('maintenance');
    await (await Job.fromId(queue, `schedule-ical-${s.id}`))?.remove();
    await sql`UPDATE schedules SET ical_fetched_at = now() - interval '25 hours' WHERE id = ${s.id}`.execute(ctx.db);
    const { queued } = await ctx.workerServices.scheduleFeeds.sweep();
    expect(queued).toBeGreaterThanOrEqual(1);
    expect((await Job.fromId(queue, `schedule-ical-${s.id}`))?.name).toBe('schedules.ical_refresh');
  });
});

/** `n` open tickets of one policy written in one statement, with the customer of a ticket made through the API. */
async function bulkTickets(ctx: TestContext, w: Workspace, policyId: string, n: number): Promise<string[]> {
  const seed = (await createTicket(ctx, w)) as { customer_id: string };
  const { rows } = await sql<{ id: string }>`
    INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id,
                         first_response_due, resolution_due, status_entered_at, created_at, updated_at)
    SELECT gen_random_uuid(), ${w.tenantId}, 'Bulk ' || g, 'Generated', 'open', 'normal', 'api', ${seed.customer_id}, ${policyId},
           now() + interval '1 hour', now() + interval '8 hours', now(), now() - make_interval(mins => g % 5000), now()
    FROM generate_series(1, ${n}) g
    RETURNING id`.execute(ctx.db);
  return rows.map((r) => r.id);
}

describe('a schedule change recomputes open tickets\' due times in the workers', () => {
  const { ctx, ws } = useTestApp({ workspaces: 1, workers: true });
  const h = api(() => ctx);

  test('2,000 open tickets are recomputed by one job in batches of 1,000; a calendar policy\'s tickets are untouched', async () => {
    const s = await h.create(ws, { name: 'Desk', time_zone: 'Europe/Berlin', weekly_hours: WEEKDAYS_9_TO_5 });
    const business = await h.policy(ws, { name: 'Business', targets: uniform(120, 960), schedule_id: s.id });
    const calendar = await h.policy(ws, { name: 'Calendar', targets: uniform(120, 960) });
    const ids = await bulkTickets(ctx, ws, business.id, 2000);
    const others = await bulkTickets(ctx, ws, calendar.id, 50);
    const before = await ctx.db.selectFrom('tickets').select(['id', 'first_response_due', 'resolution_due', 'version']).where('id', 'in', others).execute();

    // Saturdays open too, and Christmas closed: every open business ticket's due times move.
    const res = await ctx.http
      .patch(`/v1/schedules/${s.id}`)
      .set(bearer(ws.ownerKey))
      .send({ weekly_hours: { ...WEEKDAYS_9_TO_5, sat: [{ start: '10:00', end: '14:00' }] }, holidays: ['2025-12-25'] });
    expect(res.status).toBe(200);
    const queue = ctx.runtime.queues.queue('maintenance');
    const job = await eventually(
      async () => {
        const j = await Job.fromId(queue, `schedule-recompute-${s.id}-${res.body.version}`);
        return j && (await j.getState()) === 'completed' ? j : undefined;
      },
      20_000,
      'the recompute job to complete',
    );
    expect(job.returnvalue).toEqual({ read: 2000, rewritten: 2000, statements: 2 });
    // One job for the change: no other recompute of this schedule was queued.
    const all = [...(await queue.getJobs(['completed', 'waiting', 'active', 'delayed']))].filter((j) => j.name === 'schedules.recompute' && j.data.schedule_id === s.id);
    expect(all).toHaveLength(1);

    const clock = compileSchedule({ timeZone: 'Europe/Berlin', weekly: [...MINUTES_9_TO_5.slice(0, 5), [[600, 840]], []], holidays: ['2025-12-25'] });
    const rows = await ctx.db.selectFrom('tickets').select(['id', 'created_at', 'first_response_due', 'resolution_due']).where('id', 'in', ids).execute();
    const wrong = rows.filter(
      (r) => r.first_response_due.getTime() !== addBusinessMinutes(clock, r.created_at, 120).getTime() || r.resolution_due.getTime() !== addBusinessMinutes(clock, r.created_at, 960).getTime(),
    );
    expect(wrong).toEqual([]);
    const after = await ctx.db.selectFrom('tickets').select(['id', 'first_response_due', 'resolution_due', 'version']).where('id', 'in', others).execute();
    expect(after.sort((a, b) => a.id.localeCompare(b.id))).toEqual(before.sort((a, b) => a.id.localeCompare(b.id)));
  });
});

describe('the recompute\'s batches', () => {
  const { ctx, ws } = useTestApp({ workspaces: 1 });
  const h = api(() => ctx);

  test('a ticket solved while its batch\'s statement waits for it is left as the solve wrote it; the rest are rewritten', async () => {
    const s = await h.create(ws, { name: 'Desk', time_zone: 'America/New_York', weekly_hours: WEEKDAYS_9_TO_5 });
    const business = await h.policy(ws, { name: 'Business', targets: uniform(60, 480), schedule_id: s.id });
    const ids = await bulkTickets(ctx, ws, business.id, 300);
    const victim = ids[150]!;
    const due = (await h.row(victim)).first_response_due;

    const locker = new Client({ connectionString: ctx.config.DATABASE_URL });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT id FROM tickets WHERE id = $1 FOR UPDATE', [victim]);
      const running = ctx.services.tickets.recomputeSchedule(ws.tenantId, s.id, { batch: 1000 });
      // The batch's UPDATE is now waiting for the locked row.
      await eventually(
        async () => {
          // Read outside the locker's transaction: a transaction keeps its first reading of pg_stat_activity.
          const { rows } = await sql`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE tickets t SET first_response_due%'`.execute(ctx.db);
          return rows.length > 0 ? true : undefined;
        },
        10_000,
        'the recompute to wait for the locked ticket',
        20,
      );
      await locker.query(`UPDATE tickets SET status = 'solved', solved_at = now() WHERE id = $1`, [victim]);
      await locker.query('COMMIT');
      expect(await running).toEqual({ read: 300, rewritten: 299, statements: 1 });
    } finally {
      await locker.end();
    }
    const solved = await h.row(victim);
    expect(solved.status).toBe('solved');
    expect(solved.first_response_due).toEqual(due);
    const clock = compileSchedule({ timeZone: 'America/New_York', weekly: MINUTES_9_TO_5, holidays: [] });
    const other = await h.row(ids[0]!);
    expect(other.first_response_due).toEqual(addBusinessMinutes(clock, other.created_at, 60));
    // Run again: everything is as the schedule says, so nothing is written.
    expect(await ctx.services.tickets.recomputeSchedule(ws.tenantId, s.id)).toEqual({ read: 299, rewritten: 0, statements: 0 });
  });
});
