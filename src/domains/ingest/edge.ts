import { LRUCache } from 'lru-cache';
import type { RedisClient } from '../../queue/connection';
import { z } from 'zod';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { createIntakeEdge, type IntakeOutcome } from '../../intake/edge';
import type { Lanes } from '../../intake/priority/lanes';
import { notFound, payloadTooComplex, refuse, validationFailed } from '../../lib/errors';
import { setLogTenant } from '../../lib/log-context';
import type { Principal } from '../identity/principal';
import { isUuid } from '../../lib/ids';
import { iso } from '../../lib/time';
import { pageOf, type Cursor } from '../../lib/paging';
import type { QueueHub } from '../../queue/hub';
import type { ResultBus } from '../../queue/results';
import type { ChannelService } from '../channels/service';
import { channelById, type ChannelDefinition } from '../channels/registry';
import * as channelStore from '../channels/store';
import type { InboundMessage } from '../channels/adapters/types';
import type { InboundFiles } from '../inbound-files/service';
import type { IngestItem, IngestResult } from './worker';
import * as store from './store';

/** The deliveries list has one order, newest arrival first (its cursor names it). */
export const DELIVERY_SORT = '-arrival';

export const ingestBody = z.strictObject({
  tenant_id: z.string().max(100).optional(),
  agent_id: z.string().max(100).optional(),
  payload: z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), { message: 'payload must be the provider\'s JSON object' }),
});
export const ingestQuery = z.strictObject({ token: z.string().min(1).max(200).optional() });

/**
 * The HTTP side of POST /v1/ingest/{channel}: resolve the workspace, throttle, parse (pure), then coalesce
 * concurrent messages into one queued job and wait for their answers on this process's result channel.
 */
export function createIngestGateway(deps: {
  db: Db;
  config: ConfigSection<'intake' | 'redis' | 'http'>;
  redis: RedisClient;
  queues: QueueHub;
  bus: ResultBus;
  channels: ChannelService;
  lanes: Lanes;
  /** Inbound files (issue 34): caps each message's files and stages Postmark's parts before the job is queued. */
  files?: Pick<InboundFiles, 'prepare' | 'discard'>;
}) {
  const { db, config, queues, channels } = deps;
  const edge = createIntakeEdge<IngestItem>({
    redis: deps.redis,
    bus: deps.bus,
    budget: { keyPrefix: `${config.REDIS_PREFIX}:throttle:ingest`, points: config.INGEST_RATE_POINTS, windowSeconds: config.INGEST_RATE_WINDOW_SECONDS, what: 'channel' },
    batch: { max: config.INGEST_BATCH_MAX, windowMs: config.INGEST_BATCH_WINDOW_MS },
    waitMs: config.JOB_WAIT_MS,
    shards: config.INTAKE_QUEUE_SHARDS,
    lanes: deps.lanes,
    send: (items, replyTo, { bulk, ...opts }) => queues.enqueue('ingest.batch', { reply_to: replyTo, ...(bulk ? { bulk } : {}), items }, opts),
  });

  // Connections seen enabled, remembered briefly so the hot path asks the database nothing. Only positive
  // answers are kept, and the worker re-checks in its transaction (see the ingest processor).
  const connected = config.INGEST_ROUTE_CACHE_MS > 0 ? new LRUCache<string, string>({ max: 10_000, ttl: config.INGEST_ROUTE_CACHE_MS }) : null;

  async function resolveTenant(def: ChannelDefinition, body: z.output<typeof ingestBody>, token: string | undefined): Promise<{ tenantId: string; tokenHash?: string; cacheKey?: string }> {
    if (token !== undefined) {
      const hash = channels.tokenHash(token);
      const tokenHash = hash.toString('hex');
      const cacheKey = `token|${def.id}|${tokenHash}`;
      const cached = connected?.get(cacheKey);
      if (cached) return { tenantId: cached, tokenHash, cacheKey };
      const conn = await channelStore.crossTenantConnectionByToken(db, hash);
      if (!conn || conn.channel !== def.id) throw notFound('channel connection');
      connected?.set(cacheKey, conn.tenant_id);
      return { tenantId: conn.tenant_id, tokenHash, cacheKey };
    }
    let tenantId = body.tenant_id;
    if (tenantId === undefined && body.agent_id !== undefined) {
      tenantId = isUuid(body.agent_id) ? await store.crossTenantAgentWorkspace(db, body.agent_id) : undefined;
      if (!tenantId) throw notFound('channel connection');
    }
    if (tenantId === undefined) {
      throw validationFailed([{ path: 'body.tenant_id', message: 'send tenant_id, agent_id or ?token=' }], 'The workspace could not be resolved.');
    }
    if (!isUuid(tenantId)) throw notFound('channel connection');
    tenantId = tenantId.toLowerCase();
    const cacheKey = `tenant|${def.id}|${tenantId}`;
    if (connected?.get(cacheKey)) return { tenantId, cacheKey };
    if (!(await channelStore.enabledConnection(db, tenantId, def.id))) throw notFound('channel connection');
    connected?.set(cacheKey, tenantId);
    return { tenantId, cacheKey };
  }

  /** Charges the budget, queues the messages and answers with the worker's results. */
  async function deliver(
    def: ChannelDefinition,
    tenantId: string,
    tokenHash: string | undefined,
    cacheKey: string | undefined,
    parsed: InboundMessage[],
    bulk: boolean,
    payload?: unknown,
  ): Promise<IntakeOutcome> {
    const charge = await edge.charge(`${tenantId}:${def.id}`, parsed.length);
    // Files: capped, and Postmark's parts staged as blobs (the job carries their keys, never their bytes).
    let prepared: { messages: InboundMessage[]; staged: string[][] };
    try {
      prepared = deps.files ? await deps.files.prepare(tenantId, parsed, payload) : { messages: parsed, staged: [] };
    } catch (err) {
      await charge.refundAll();
      throw err;
    }
    const { messages, staged } = prepared;
    // Staged parts the worker will never fetch (a refused delivery, a redelivery) go at once; the sweep takes
    // what an unanswered (202) delivery leaves.
    const unused = (which: (i: number) => boolean) => deps.files?.discard(staged.flatMap((keys, i) => (which(i) ? keys : [])));
    const ids = messages.map(() => edge.newId());
    let submitted;
    try {
      submitted = await edge.submit(messages.map((message, i) => ({ id: ids[i]!, tenant_id: tenantId, channel: def.id, ...(tokenHash ? { token_hash: tokenHash } : {}), message })), { bulk });
    } catch (err) {
      await unused(() => true);
      throw err;
    }
    if (!submitted.accepted) {
      const answered = submitted.results;
      await unused((i) => !answered[i]?.ok || (answered[i]?.value as IngestResult | undefined)?.was_duplicate === true);
    }
    if (submitted.accepted) {
      // Still processed exactly once; the provider message ids are what GET /v1/ingest/deliveries lists.
      return { accepted: true, body: { status: 'accepted', channel: def.id, job_id: ids[0]!, provider_message_ids: messages.map((m) => m.providerMessageId) } };
    }
    const { results } = submitted;
    const failed = results.find((r) => !r.ok);
    if (failed?.error?.code === 'not_found') {
      // The worker found the connection gone (disabled or token rotated since the cache saw it): nothing
      // was written, so the budget's points go back, and the answer is the edge's own 404.
      await charge.refundAll();
      if (cacheKey) connected?.delete(cacheKey);
      throw notFound('channel connection');
    }
    // Exactly what was not written goes back: refused items and deliveries we already had (src/limits/intake.ts).
    await charge.settle(submitted);
    if (failed) throw edge.refusalOf(failed);
    const values = results.map((r) => r.value as IngestResult);
    const [first] = values;
    return { body: values.length === 1 ? first : { ...first, messages: values }, duplicate: values.every((v) => v.was_duplicate) };
  }

  return {
    async receive(channel: string, body: z.output<typeof ingestBody>, query: z.output<typeof ingestQuery>): Promise<IntakeOutcome> {
      const def = channelById(channel);
      if (!def) throw notFound('channel');
      if (!def.adapter) {
        throw refuse('channel_adapter_unavailable', `The ${def.id} channel has no adapter yet; messages cannot be ingested.`);
      }
      const { tenantId, tokenHash, cacheKey } = await resolveTenant(def, body, query.token);
      setLogTenant(tenantId);
      // Parsed (pure) before the workspace is charged: a payload nobody can read costs the workspace nothing
      // (its refusal is charged to the sender's address, see chargeRefusals on the route).
      const parsed = def.adapter.parse(body.payload);
      if (!parsed.ok) {
        throw refuse('channel_payload_invalid', `The ${def.id} adapter cannot read this payload: ${parsed.reason}.`);
      }
      if (parsed.messages.length === 0) {
        return { body: { channel: def.id, ignored: true, reason: 'the payload holds no customer message (e.g. delivery receipts)' } };
      }
      if (parsed.messages.length > config.INGEST_MAX_MESSAGES_PER_REQUEST) {
        throw payloadTooComplex([
          {
            path: 'body.payload',
            message: `the payload carries ${parsed.messages.length} messages; at most ${config.INGEST_MAX_MESSAGES_PER_REQUEST} are accepted per request`,
          },
        ]);
      }
      // Its workspace's lane first (in memory: it waits while the workspace already has its share queued), then
      // one point per message of its budget: a request carrying N messages writes up to N tickets.
      const { release, bulk } = await edge.enter(tenantId, parsed.messages.length);
      try {
        return await deliver(def, tenantId, tokenHash, cacheKey, parsed.messages, bulk, body.payload);
      } finally {
        release();
      }
    },

    /**
     * Messages their route has read already (a web chat visitor's, posted through a session, issue 33): the
     * workspace and the connection's current token hash are known, so they go straight to the workspace's lane
     * and budget, exactly as `receive` sends them on; the worker checks in its transaction that the token is
     * still the connection's (404 not_found when it was rotated meanwhile, nothing written).
     */
    async receiveParsed(channel: string, tenantId: string, tokenHash: string, messages: InboundMessage[], payload?: unknown): Promise<IntakeOutcome> {
      const def = channelById(channel);
      if (!def) throw notFound('channel');
      const { release, bulk } = await edge.enter(tenantId, messages.length);
      try {
        return await deliver(def, tenantId, tokenHash, undefined, messages, bulk, payload);
      } finally {
        release();
      }
    },

    /**
     * Work a channel's sender causes outside a message (a web chat visitor's upload): one point of the
     * workspace's budget for the channel, as a message costs (429 `throttled` past it). Not given back.
     */
    async charge(tenantId: string, channel: string): Promise<void> {
      await edge.charge(`${tenantId}:${channel}`, 1);
    },

    /** Whether the ledger holds this message already (a redelivery, answered `was_duplicate` when sent again). */
    async received(tenantId: string, channel: string, providerMessageId: string): Promise<boolean> {
      return (await store.getDeliveries(db, tenantId, [{ channel, providerMessageId }])).size > 0;
    },

    async deliveries(actor: Principal, q: { limit: number; after?: Cursor; channel?: string }) {
      const rows = await store.recentDeliveries(db, actor.tenantId, q);
      return pageOf('deliveries', rows, q.limit, DELIVERY_SORT, (r) => ({
        channel: r.channel,
        provider_message_id: r.provider_message_id,
        ticket_id: r.ticket_id,
        customer_id: r.customer_id,
        was_created: r.was_created,
        first_seen_at: iso(r.first_seen_at),
        last_seen_at: iso(r.last_seen_at),
        duplicate_count: r.duplicate_count,
      }));
    },


  };
}

export type IngestGateway = ReturnType<typeof createIngestGateway>;
