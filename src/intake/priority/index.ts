/**
 * The intake-priority room (issue 35): "live intake goes first", said in one place.
 *
 * - pressure.ts: how pressed live intake is: the host's CPU saturation (the API's lanes ask it on the request
 *   path) and, for background work, saturation while live intake is in flight on the intake queues;
 * - lanes.ts: fair share per workspace in each API process, and which items are a burst's (bulk);
 * - classes.ts: live and bulk: a bulk batch's job priority, and the worker's writes by class;
 * - yield.ts: background work (the webhook sender, rollups, sweeps, prunes) makes way for live intake, bounded.
 *
 * Its settings, one idea each, are the `intakePriority` section of src/config.ts. Nothing here imports a domain:
 * the intake edge, the ingest and webhook edges, the webhook sender and the workers' processors import it.
 */
import type { ConfigSection } from '../../config';
import type { QueueHub } from '../../queue/hub';
import { createLanes } from './lanes';
import { createHostSaturation, createIntakePressure } from './pressure';
import { createBackgroundYield } from './yield';

export { createLanes, SHARE_RAMP_MS, type Entered, type Lanes } from './lanes';
export { createHostSaturation, createIntakePressure, type IntakePressure } from './pressure';
export { BULK_PRIORITY, createClassedWrites, jobClass } from './classes';
export { createBackgroundYield, makeWayForIntake, type BackgroundYield } from './yield';

/**
 * The API's side: the lanes, one per workspace per process, across channel ingest and provider webhooks. While the
 * host's CPUs are saturated and others send intake too, a bursting workspace gets a smaller share.
 */
export function createIntakeLanes(config: ConfigSection<'intakePriority'>) {
  return createLanes({
    perWorkspace: config.INTAKE_WORKSPACE_QUEUED,
    maxWaiting: config.INTAKE_WORKSPACE_WAITING,
    sharedQueued: config.INTAKE_WORKSPACE_SHARED_QUEUED,
    contended: createHostSaturation().saturated,
  });
}

/**
 * The workers' side: the pressure reading (whether live intake saturates the host) and the one yield of
 * background work built on it, which the webhook sender, rollups, sweeps and prunes make way through.
 */
export function createBackgroundPriority(deps: { queues: QueueHub; config: ConfigSection<'intakePriority'> & { INTAKE_QUEUE_SHARDS: number } }) {
  const { config } = deps;
  const pressure = createIntakePressure(deps.queues, config.INTAKE_QUEUE_SHARDS);
  return { pressure, background: createBackgroundYield(pressure, config.BACKGROUND_INTAKE_YIELD_MS) };
}

export type BackgroundPriority = ReturnType<typeof createBackgroundPriority>;
