/**
 * Group commit of intake batches in a worker (issue 20): a write's size follows the backlog. Batches that
 * arrive while every write slot is busy are written together by the next free slot, each still answered its
 * own items; a failed write fails each batch it carried (so BullMQ retries each job), and the real ingest
 * write merges many queued batches into one transaction with every message written once.
 */
import { randomInt } from 'node:crypto';
import { createGroupCommit } from '../src/intake/group-commit';
import { intakeBatchProcessor } from '../workers/processors/intake';
import { channelById } from '../src/domains/channels/registry';
import type { IngestItem, IngestResult } from '../src/domains/ingest/worker';
import type { ItemResult } from '../src/queue/results';
import { createWorkspace } from './helpers/factories';
import { connect, countRows } from './helpers/ingest';
import { smsPayload } from './helpers/payloads';
import { useTestApp } from './helpers/use-test-app';

type Item = { id: string };
const items = (prefix: string, n: number): Item[] => Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}` }));

/** A write the test finishes by hand, recording what each call carried. */
function manualWrite() {
  const calls: { ids: string[]; finish: () => void; fail: (e: Error) => void }[] = [];
  const write = (batch: Item[]) =>
    new Promise<ItemResult[]>((resolve, reject) => {
      calls.push({ ids: batch.map((i) => i.id), finish: () => resolve(batch.map((i) => ({ id: i.id, ok: true, value: `done ${i.id}` }))), fail: reject });
    });
  return { calls, write };
}
const tick = () => new Promise((r) => setImmediate(r));

describe('group commit', () => {
  test('batches arriving while every slot is busy are written together by the next free slot, each answered its own items', async () => {
    const { calls, write } = manualWrite();
    const group = createGroupCommit({ slots: 1, maxItems: 100, write });
    const first = group.submit(items('a', 2));
    await tick();
    const queued = [group.submit(items('b', 3)), group.submit(items('c', 1)), group.submit(items('d', 4))];
    await tick();
    expect(calls.map((c) => c.ids.length)).toEqual([2]);
    calls[0]!.finish();
    expect((await first).map((r) => r.value)).toEqual(['done a0', 'done a1']);
    await tick();
    // One write for the three that waited, in arrival order.
    expect(calls).toHaveLength(2);
    expect(calls[1]!.ids).toEqual(['b0', 'b1', 'b2', 'c0', 'd0', 'd1', 'd2', 'd3']);
    calls[1]!.finish();
    const [b, c, d] = await Promise.all(queued);
    expect(b!.map((r) => r.id)).toEqual(['b0', 'b1', 'b2']);
    expect(c!.map((r) => r.id)).toEqual(['c0']);
    expect(d!.map((r) => r.value)).toEqual(['done d0', 'done d1', 'done d2', 'done d3']);
    expect(group.stats()).toEqual({ writes: 2, batches: 4, items: 10 });
  });

  test('with a slot free a batch is written at once, alone', async () => {
    const { calls, write } = manualWrite();
    const group = createGroupCommit({ slots: 2, maxItems: 100, write });
    void group.submit(items('a', 1));
    void group.submit(items('b', 1));
    await tick();
    expect(calls.map((c) => c.ids)).toEqual([['a0'], ['b0']]);
  });

  test('a write carries at most maxItems (a larger batch still goes, alone), and batches sharing an item id go in separate writes', async () => {
    const { calls, write } = manualWrite();
    const group = createGroupCommit({ slots: 1, maxItems: 5, write });
    void group.submit(items('x', 1));
    await tick();
    void group.submit(items('a', 3));
    void group.submit(items('b', 3));
    void group.submit(items('big', 7));
    void group.submit([{ id: 'dup' }]);
    void group.submit([{ id: 'dup' }]);
    for (let i = 0; i < 5; i++) {
      await tick();
      calls.at(-1)!.finish();
    }
    await tick();
    expect(calls.map((c) => c.ids.length)).toEqual([1, 3, 3, 7, 1, 1]);
    expect(calls.slice(4).map((c) => c.ids)).toEqual([['dup'], ['dup']]);
  });

  test('a failed write fails every batch it carried, and the batches after it are still written', async () => {
    const { calls, write } = manualWrite();
    const group = createGroupCommit({ slots: 1, maxItems: 100, write });
    const first = group.submit(items('a', 1));
    await tick();
    const b = group.submit(items('b', 1));
    const c = group.submit(items('c', 1));
    await tick();
    calls[0]!.finish();
    await first;
    await tick();
    calls[1]!.fail(new Error('database lost'));
    await expect(b).rejects.toThrow('database lost');
    await expect(c).rejects.toThrow('database lost');
    const d = group.submit(items('d', 1));
    await tick();
    calls[2]!.finish();
    expect((await d).map((r) => r.id)).toEqual(['d0']);
  });
});

describe('group commit held by mayStart', () => {
  test('a held write starts on kick once mayStart allows it, and mayStart sees how many writes run', async () => {
    const { calls, write } = manualWrite();
    let open = false;
    const seen: number[] = [];
    const group = createGroupCommit({ slots: 2, maxItems: 100, write, mayStart: (running) => (seen.push(running), open) });
    const held = group.submit(items('h', 2));
    await tick();
    expect(calls).toHaveLength(0);
    open = true;
    group.kick();
    await tick();
    expect(calls.map((c) => c.ids)).toEqual([['h0', 'h1']]);
    expect(seen).toEqual([0, 0]);
    calls[0]!.finish();
    expect((await held).map((r) => r.id)).toEqual(['h0', 'h1']);
  });
});

describe('group commit over the real ingest write', () => {
  const { ctx } = useTestApp();

  test('a live batch is written while a burst\'s (bulk) writes hold every slot', async () => {
    const blocked: (() => void)[] = [];
    const written: string[] = [];
    const write = (batch: Item[]) =>
      new Promise<ItemResult[]>((resolve) => {
        const go = () => {
          written.push(...batch.map((i) => i.id));
          resolve(batch.map((i) => ({ id: i.id, ok: true, value: null })));
        };
        if (batch[0]!.id.startsWith('bulk')) blocked.push(go);
        else go();
      });
    const run = intakeBatchProcessor({ ...ctx.config, INTAKE_WRITE_SLOTS: 1 }, ctx.runtime.redis, write);
    const job = { attempt: 1, last: true };
    const bulk = [run({ reply_to: 'nobody', bulk: true, items: [{ id: 'bulk-1' }] }, job), run({ reply_to: 'nobody', bulk: true, items: [{ id: 'bulk-2' }] }, job)];
    await tick();
    await run({ reply_to: 'nobody', items: [{ id: 'live-1' }] }, job);
    expect(written).toEqual(['live-1']);
    blocked.shift()!();
    await bulk[0];
    await tick();
    blocked.shift()!();
    await Promise.all(bulk);
    expect(written).toEqual(['live-1', 'bulk-1', 'bulk-2']);
  });

  test('no bulk write starts while a live write runs, and right after live ones bulk writes go one at a time', async () => {
    const pending = new Map<string, () => void>();
    const started: string[] = [];
    const write = (batch: Item[]) =>
      new Promise<ItemResult[]>((resolve) => {
        const id = batch.map((i) => i.id).join('+');
        started.push(id);
        pending.set(id, () => resolve(batch.map((i) => ({ id: i.id, ok: true, value: null }))));
      });
    const run = intakeBatchProcessor({ ...ctx.config, INTAKE_WRITE_SLOTS: 2 }, ctx.runtime.redis, write);
    const job = { attempt: 1, last: true };
    const live = run({ reply_to: 'nobody', items: [{ id: 'live-1' }] }, job);
    await tick();
    const bulk = [run({ reply_to: 'nobody', bulk: true, items: [{ id: 'bulk-1' }] }, job)];
    await tick();
    // The live write holds the bulk one back.
    expect(started).toEqual(['live-1']);
    pending.get('live-1')!();
    await live;
    await tick();
    expect(started).toEqual(['live-1', 'bulk-1']);
    // Live traffic was just seen: a second bulk batch waits for the first, though a second slot is free.
    bulk.push(run({ reply_to: 'nobody', bulk: true, items: [{ id: 'bulk-2' }] }, job));
    await tick();
    expect(started).toEqual(['live-1', 'bulk-1']);
    pending.get('bulk-1')!();
    await bulk[0];
    await tick();
    expect(started).toEqual(['live-1', 'bulk-1', 'bulk-2']);
    pending.get('bulk-2')!();
    await Promise.all(bulk);
  });

  test('twelve batches submitted at once with one slot are written in fewer transactions; every message is written once and answered its own ticket', async () => {
    const w = await createWorkspace(ctx);
    await connect(ctx, w, 'sms');
    const sms = channelById('sms')!.adapter!;
    // Senders this workspace has never met: one new customer and ticket per message.
    const run = String(randomInt(10_000)).padStart(4, '0');
    const batches: IngestItem[][] = Array.from({ length: 12 }, (_, b) =>
      Array.from({ length: 5 }, (_, i) => {
        const parsed = sms.parse(smsPayload({ from: `+1666${run}${String(b * 10 + i).padStart(3, '0')}`, body: `batch ${b} item ${i}` }));
        if (!parsed.ok) throw new Error('sms payload did not parse');
        return { id: `g${b}-${i}`, tenant_id: w.tenantId, channel: 'sms', message: parsed.messages[0]! };
      }),
    );
    const group = createGroupCommit({ slots: 1, maxItems: 256, write: ctx.workerServices.ingestProcessor.processBatch });
    const answers = await Promise.all(batches.map((b) => group.submit(b)));
    const { writes, batches: carried } = group.stats();
    expect(carried).toBe(12);
    expect(writes).toBeLessThan(12);
    // Each batch got its own items back, in order, each a ticket of its own sender.
    answers.forEach((a, b) => expect(a.map((r) => r.id)).toEqual(batches[b]!.map((i) => i.id)));
    const tickets = answers.flat().map((r) => (r.value as IngestResult).ticket_id);
    expect(new Set(tickets).size).toBe(60);
    const rows = await countRows(ctx, w.tenantId);
    expect(rows.tickets).toBe(60);
    expect(rows.customers).toBe(60);
    expect(rows.ingest_deliveries).toBe(60);
  });
});
