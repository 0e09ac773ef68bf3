/**
 * The intake-priority room, part one: how pressed live intake is. Two readings of one host sampler (its CPU busy
 * share over a window, held for a calm second): `createHostSaturation` (synchronous, in memory: the API's lanes
 * ask it on the request path) and `createIntakePressure` (the same, and live intake in flight on the intake
 * queues: background work in a worker asks it before it runs). Moved from src/queue/intake-pressure.ts (issue 35).
 */
import { cpus } from 'node:os';
import { shardsOf, SHARDED_QUEUES } from '../../queue/jobs';
import type { QueueHub } from '../../queue/hub';

/** A reading is reused this long: every sender of the process asks before each round. */
const SAMPLE_MS = 100;
/** The CPU share is taken over at least this window, so one quiet 100 ms does not read as spare capacity. */
const WINDOW_MS = 300;
/**
 * The host counts as busy when its CPUs were busy at least this share of the window. Saturated intake on a
 * 2-core host measured 0.7 to 1.0 per 100 ms (it waits on round trips too), so 0.9 missed half of it.
 */
const BUSY_SHARE = 0.75;
/**
 * Saturation lasts until it has been absent this long. Saturated intake reads as calm for one 100 ms sample
 * in four or five (the intake queue drains for a moment, a burst of round trips leaves a core idle), and each
 * such sample let a whole round through: without this, the senders sent a fifth of the backlog mid-flood.
 */
const CALM_MS = 1000;

/** Busy and total CPU time of the host so far, in milliseconds, over every CPU. */
function hostCpu(): { busy: number; total: number } {
  let busy = 0;
  let total = 0;
  for (const c of cpus()) {
    const t = c.times;
    const all = t.user + t.nice + t.sys + t.irq + t.idle;
    total += all;
    busy += all - t.idle;
  }
  return { busy, total };
}

/**
 * The host's CPU busy share over the last WINDOW_MS: each `read()` takes a reading of the kernel's counters
 * and answers the share since the oldest reading still in the window (the one just before it, at first).
 */
function busyWindow(cpu: () => { busy: number; total: number }) {
  let readings = [{ at: Date.now(), ...cpu() }];
  return {
    read(): number {
      const now = Date.now();
      readings.push({ at: now, ...cpu() });
      const from = readings.findLastIndex((r) => now - r.at >= WINDOW_MS);
      if (from > 0) readings = readings.slice(from);
      const [oldest, latest] = [readings[0]!, readings.at(-1)!];
      const total = latest.total - oldest.total;
      return total > 0 ? (latest.busy - oldest.busy) / total : 0;
    },
  };
}

export interface IntakePressure {
  /** True while live intake is in flight and the host's CPUs have no idle time to spare. */
  saturated(): Promise<boolean>;
}

/**
 * Whether background work (outbound webhook sends, rollups, sweeps, prunes) should make way for live intake right now. Two readings,
 * both cheap and reused for SAMPLE_MS:
 * - intake in flight: jobs waiting or running on the intake queues (one Redis round trip per queue), so
 *   background work never pauses for an idle intake;
 * - the host's CPU busy share since the previous reading (the kernel's counters through `os.cpus()`), so it
 *   pauses only when intake and it compete for the same cores. A worker on a host of its own sees idle CPUs
 *   and never pauses; what it costs the database is not visible here.
 * Saturation holds for CALM_MS after the last sample that found it, so a momentary lull mid-flood is not
 * mistaken for the end of it. A reading that fails (Redis down) counts as not saturated: pacing is an
 * optimisation, never a reason to stop.
 */
export function createIntakePressure(queues: QueueHub, shards: number, read: { cpu: () => { busy: number; total: number } } = { cpu: hostCpu }): IntakePressure {
  /** The queues that carry live intake (customer messages from channels, provider webhooks), every shard. */
  const intakeQueues = SHARDED_QUEUES.flatMap((q) => shardsOf(q, shards));
  let last = { at: 0, saturated: false };
  /** When a sample last found intake saturated. */
  let saturatedAt = -Infinity;
  const window = busyWindow(read.cpu);
  let pending: Promise<boolean> | null = null;

  async function sample(): Promise<boolean> {
    const now = Date.now();
    const busyShare = window.read();
    let inFlight = 0;
    if (busyShare >= BUSY_SHARE) {
      const counts = await Promise.all(intakeQueues.map((q) => queues.queue(q).getJobCounts('active', 'waiting', 'prioritized')));
      inFlight = counts.reduce((n, c) => n + (c.active ?? 0) + (c.waiting ?? 0) + (c.prioritized ?? 0), 0);
    }
    if (busyShare >= BUSY_SHARE && inFlight > 0) saturatedAt = now;
    last = { at: now, saturated: now - saturatedAt < CALM_MS };
    return last.saturated;
  }

  return {
    async saturated() {
      if (Date.now() - last.at < SAMPLE_MS) return last.saturated;
      // One reading at a time per process, whoever asks meanwhile shares it.
      pending ??= sample()
        .catch(() => {
          last = { ...last, at: Date.now(), saturated: false };
          return false;
        })
        .finally(() => (pending = null));
      return pending;
    },
  };
}

/**
 * Whether this host's CPUs are saturated, read in the process that asks (the API's intake lanes): the busy
 * share over the last WINDOW_MS, sampled every SAMPLE_MS from the kernel's counters once first asked, held for
 * CALM_MS after the last saturated sample (as above: a momentary lull mid-flood is not the end of it). Synchronous
 * and in memory: it is asked on the request path.
 */
export function createHostSaturation(read: { cpu: () => { busy: number; total: number } } = { cpu: hostCpu }) {
  let window: ReturnType<typeof busyWindow> | null = null;
  let saturatedAt = -Infinity;
  let timer: NodeJS.Timeout | null = null;
  const sample = () => {
    if (window!.read() >= BUSY_SHARE) saturatedAt = Date.now();
  };
  return {
    saturated(): boolean {
      if (!timer) {
        window = busyWindow(read.cpu);
        timer = setInterval(sample, SAMPLE_MS).unref();
      }
      return Date.now() - saturatedAt < CALM_MS;
    },
    close(): void {
      if (timer) clearInterval(timer);
      timer = null;
    },
  };
}

