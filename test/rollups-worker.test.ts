/**
 * Rollups: precomputation with the rollups worker running (the workers stay up until the file ends).
 */
import { addMember, createWorkspace } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { eventually, sleep } from './helpers/wait';
import { aggregate, api, bucketCount, entry, expectNoDifferences, journalCount, normCsat, normSummary, rawCsat, rawSummary, summary, useRollupsApp } from './helpers/rollups';

const { ctx } = useRollupsApp();

// 4. Precomputation with the worker running (last: the workers stay up until the file ends)
// ---------------------------------------------------------------------------------------------------------

describe('precomputation with the rollups worker running', () => {
  beforeAll(async () => {
    await ctx.startWorkers();
    // Let the sweep the scheduler may start with (and the fold jobs left by earlier tests) run first.
    await sleep(1500);
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  test('a burst of 30 concurrent writes is folded by far fewer rollups.fold jobs; afterwards the journal is empty and buckets equal raw', async () => {
    const ws = await createWorkspace(ctx);
    const a = await addMember(ctx, ws, 'editor');
    const t1 = await createTicket(ctx, ws, { assignee_id: a.userId });
    const t2 = await createTicket(ctx, ws);
    const folds = jest.spyOn(ctx.workerServices.rollups, 'fold');
    const writes = Array.from({ length: 30 }, (_, i) =>
      i % 3 === 2 ? api.addCsat(ws, i % 2 ? t1.id : t2.id, { score: 1 + (i % 5) }) : api.addEntry(ws, i % 2 ? t1.id : t2.id, { minutes: 1 + i, user_id: a.userId, billable: i % 4 !== 0 }),
    );
    const results = await Promise.all(writes);
    expect(results.map((r) => r.status)).toEqual(Array(30).fill(201));

    await eventually(async () => ((await journalCount(ws.tenantId)) === 0 ? true : undefined), 10_000, 'journal of the burst folded');
    const runs = folds.mock.calls.filter(([tenant]) => tenant === ws.tenantId).length;
    expect(runs).toBeGreaterThanOrEqual(1);
    // Far fewer than the 30 writes (a slow machine may spread the burst over a few coalescing windows).
    expect(runs).toBeLessThanOrEqual(10);
    expect(await bucketCount(ws.tenantId)).toBeGreaterThan(0);
    await expectNoDifferences(ws.tenantId);
    expect(normSummary(await summary(ws, { since_days: 1 }))).toEqual(normSummary(await rawSummary(ctx.db, ws.tenantId, { since_days: 1 })));
    expect(normCsat(await aggregate(ws, 1))).toEqual(normCsat(await rawCsat(ctx.db, ws.tenantId, 1)));
    expect((await summary(ws, { since_days: 1 })).total.entries).toBe(20);
  });

  test('a write that lands while its workspace is being folded is folded soon after, not left for the minute sweep', async () => {
    const ws = await createWorkspace(ctx);
    const t = await createTicket(ctx, ws);
    const realFold = ctx.workerServices.rollups.fold;
    let entered!: () => void;
    const inFold = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let first = true;
    jest.spyOn(ctx.workerServices.rollups, 'fold').mockImplementation(async (tenant: string) => {
      const out = await realFold(tenant);
      if (tenant === ws.tenantId && first) {
        first = false;
        entered();
        await gate; // the job is still active here
      }
      return out;
    });
    try {
      await entry(ws, t.id, { minutes: 10 });
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([inFold, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('no fold job ran for the first write')), 10_000)))]);
      clearTimeout(timer);
      await entry(ws, t.id, { minutes: 20 });
      expect(await journalCount(ws.tenantId)).toBe(1);
    } finally {
      release();
    }
    // Reads are exact meanwhile either way.
    expect((await summary(ws, { since_days: 1 })).total.minutes).toBe(30);
    const folded = await eventually(async () => ((await journalCount(ws.tenantId)) === 0 ? true : undefined), 5_000, 'the second write folded').catch(() => false);
    expect({ foldedWithin5s: folded, journal: await journalCount(ws.tenantId) }).toEqual({ foldedWithin5s: true, journal: 0 });
  });
});
