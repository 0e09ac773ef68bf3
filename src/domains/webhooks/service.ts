import type { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { consumeOrRefuse } from '../../lib/rate';
import type { Config } from '../../config';
import { isDataError, type Db, type Executor } from '../../db';
import type { IntegrationRow, TranscriptEventRow } from '../../db/types';
import { dependencyUnavailable, DomainError, notFound, refuse, validationFailed } from '../../lib/errors';
import { inspectJson, jsonTooComplex, scanJson } from '../../lib/json-limits';
import type { HandlerResult } from '../../http/result';
import type { Principal } from '../identity/principal';
import { createSealer } from '../../lib/crypto';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { createCoalescer } from '../../queue/coalescer';
import type { QueueHub } from '../../queue/hub';
import type { JobData } from '../../queue/jobs';
import { refusalOf, TIMED_OUT, type ItemResult, type ResultBus } from '../../queue/results';
import type { AuditService } from '../audit/service';
import { roleAtLeast } from '../identity/roles';
import { scopesCover } from '../identity/scopes';
import { lockTenant } from '../workspaces/store';
import { classify, verifySignature, type WebhookHeaders, type WebhookProviderId } from './providers';
import * as store from './store';

export type WebhookItem = JobData<'webhooks.batch'>['items'][number];

export interface WebhookResult {
  transcript_id: string;
  external_ticket_id: string;
  was_duplicate: boolean;
}

const isJson = (contentType: string | string[] | undefined) => {
  const type = String(Array.isArray(contentType) ? contentType[0] : (contentType ?? '')).split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type);
};

/** `https://x.test//` → `https://x.test` (an index walk: `/\/+$/` is quadratic on a long run of "/"). */
function withoutTrailingSlashes(url: string): string {
  let end = url.length;
  while (end > 0 && url[end - 1] === '/') end--;
  return url.slice(0, end);
}

const mayListIntegrations = (actor: Principal) => roleAtLeast(actor.role, 'admin') && (!actor.scopes || scopesCover(actor.scopes, 'admin-resources', 'read'));

const signatureInvalid = () => refuse('signature_invalid', 'The webhook signature is missing, does not match the body, or is outside the accepted time window.');

/**
 * Webhook intake from other helpdesks (Zendesk, Front, Help Scout), and the integrations that receive it.
 * The HTTP tier checks the integration, the content type, the signature over the raw bytes, the throttle and
 * the classification (all without writing); ticket events are coalesced into `webhooks.batch` jobs whose
 * worker writes them set-based into transcripts, once per provider event.
 */
export function createWebhookService(deps: { db: Db; config: Config; redis: Redis; queues: QueueHub; bus: ResultBus; audit: AuditService }) {
  const { db, config, queues, bus, audit } = deps;
  const sealer = createSealer(config.ENCRYPTION_KEYS);
  const ctx = (tenantId: string, integrationId: string) => `integration:${tenantId}:${integrationId}:signing_secret`;
  const limiter = new RateLimiterRedis({
    storeClient: deps.redis,
    keyPrefix: `${config.REDIS_PREFIX}:throttle:webhooks`,
    points: config.WEBHOOK_RATE_POINTS,
    duration: config.WEBHOOK_RATE_WINDOW_SECONDS,
  });
  const coalescer = createCoalescer<WebhookItem>({
    bus,
    max: config.INGEST_BATCH_MAX,
    windowMs: config.INGEST_BATCH_WINDOW_MS,
    waitMs: config.JOB_WAIT_MS,
    send: (items, replyTo) => queues.enqueue('webhooks.batch', { reply_to: replyTo, items }),
  });

  const base = () => withoutTrailingSlashes(config.PUBLIC_BASE_URL ?? `http://localhost:${config.PORT}`);
  const present = (i: IntegrationRow) => ({
    id: i.id,
    provider: i.provider,
    name: i.name,
    signing_secret_set: i.signing_secret_sealed !== null,
    webhook_url: `${base()}/v1/webhooks/${i.provider}/${i.id}`,
    created_at: iso(i.created_at),
  });
  const sealed = (tenantId: string, id: string, secret: string | undefined) => (secret ? sealer.seal(secret, ctx(tenantId, id)) : null);

  const throttle = (integrationId: string) => consumeOrRefuse(limiter, integrationId, 'integration');

  /** The worker's writes for one workspace's deliveries, inside the caller's transaction. */
  async function writeBatch(tx: Executor, tenantId: string, items: WebhookItem[], out: Map<string, WebhookResult>) {
    const key = (i: WebhookItem): store.DeliveryKey => ({ integrationId: i.integration_id, dedupeKey: i.dedupe_key });
    // Ledger rows first, in key order, so two jobs never wait on each other in a cycle.
    const byKey = [...items].sort((a, b) => store.deliveryId(key(a)).localeCompare(store.deliveryId(key(b))));
    const won = await store.claimDeliveries(tx, tenantId, byKey.map((i) => ({ ...key(i), correlationId: i.id })));
    const fresh = items.filter((i) => won.has(i.id));
    const transcripts = await store.transcriptsFor(
      tx,
      tenantId,
      fresh.map((i) => ({ id: newId(), integrationId: i.integration_id, externalTicketId: i.external_ticket_id })),
    );
    const transcriptOf = (i: WebhookItem) => transcripts.get(store.transcriptKey(i.integration_id, i.external_ticket_id))!;
    await store.appendEvents(
      tx,
      tenantId,
      fresh.map((i) => ({
        id: newId(),
        transcript_id: transcriptOf(i),
        provider_event_id: i.provider_event_id,
        type: i.type,
        occurred_at: i.occurred_at,
        status: i.status,
        subject: i.subject,
        priority: i.priority,
        requester: i.requester,
        raw: i.raw,
      })),
    );
    await store.completeDeliveries(tx, tenantId, fresh.map((i) => ({ ...key(i), transcriptId: transcriptOf(i), externalTicketId: i.external_ticket_id })));
    for (const i of fresh) out.set(i.id, { transcript_id: transcriptOf(i), external_ticket_id: i.external_ticket_id, was_duplicate: false });

    // Copies: of a delivery claimed in this job, or of one already in the ledger.
    const claimedHere = new Map(fresh.map((i) => [store.deliveryId(key(i)), i.id]));
    const copies = items.filter((i) => !won.has(i.id));
    const firsts = await store.getDeliveries(tx, tenantId, copies.filter((c) => !claimedHere.has(store.deliveryId(key(c)))).map(key));
    const counted: store.DeliveryKey[] = [];
    for (const c of copies) {
      const here = claimedHere.get(store.deliveryId(key(c)));
      const first = here ? { ...out.get(here)!, first_correlation_id: here } : firsts.get(store.deliveryId(key(c)))!;
      // The same job run again after a crash is not a redelivery: it gets its first answer back.
      const rerun = first.first_correlation_id === c.id;
      if (!rerun) counted.push(key(c));
      out.set(c.id, { transcript_id: first.transcript_id, external_ticket_id: first.external_ticket_id, was_duplicate: !rerun });
    }
    await store.countDuplicates(tx, tenantId, counted);
  }

  const presentEvent = (e: TranscriptEventRow) => ({
    id: e.id,
    provider_event_id: e.provider_event_id,
    type: e.type,
    occurred_at: e.occurred_at ? iso(e.occurred_at) : null,
    status: e.status,
    subject: e.subject,
    priority: e.priority,
    requester: e.requester,
    received_at: iso(e.received_at),
    raw: e.raw,
  });

  async function integrationOf(actor: Principal, id: string) {
    const row = await store.getIntegration(db, actor.tenantId, id);
    if (!row) throw notFound('integration');
    return row;
  }

  /** The webhooks.batch job: every item answered; workspaces in id order, all in one transaction. */
  async function processBatch(items: WebhookItem[]): Promise<ItemResult[]> {
      const out = new Map<string, WebhookResult>();
      const tenants = [...new Set(items.map((i) => i.tenant_id))].sort();
      try {
        await db.transaction().execute(async (tx) => {
          for (const tenantId of tenants) await writeBatch(tx, tenantId, items.filter((i) => i.tenant_id === tenantId), out);
        });
      } catch (err) {
        // An integration deleted meanwhile (foreign key), a value PostgreSQL refuses, or a lost race: each item
        // alone, so one cannot fail the rest; alone, the first two are answered as refusals, never retried.
        const code = String((err as { code?: unknown })?.code);
        if (items.length === 1 && code === '23503') {
          return items.map((i) => ({ id: i.id, ok: false, error: { code: 'not_found', detail: 'The integration no longer exists.' } }));
        }
        if (items.length === 1 && isDataError(err)) {
          return items.map((i) => ({ id: i.id, ok: false, error: { code: 'webhook_payload_invalid', detail: 'The payload holds a value that cannot be stored.' } }));
        }
        if (items.length === 1 || !(['23503', '23505', '40P01'].includes(code) || isDataError(err))) throw err;
        const results: ItemResult[] = [];
        for (const item of items) results.push(...(await processBatch([item])));
        return results;
      }
      return items.map((i) => ({ id: i.id, ok: true, value: out.get(i.id) }));
    }

  return {
    async createIntegration(actor: Principal, input: { provider: WebhookProviderId; name: string; signing_secret?: string }) {
      const id = newId();
      const row = await db.transaction().execute(async (tx) => {
        // Each integration carries its own webhook budget, so their number is capped; the tenant row lock
        // makes concurrent creations count one after another.
        await lockTenant(tx, actor.tenantId);
        if ((await store.countIntegrations(tx, actor.tenantId)) >= config.MAX_INTEGRATIONS_PER_WORKSPACE) {
          throw refuse('integration_limit_reached', `A workspace can hold at most ${config.MAX_INTEGRATIONS_PER_WORKSPACE} integrations; delete one first.`);
        }
        const created = await store.insertIntegration(tx, actor.tenantId, { id, provider: input.provider, name: input.name, signing_secret_sealed: sealed(actor.tenantId, id, input.signing_secret) });
        await audit.record(tx, actor, 'integration.created', { type: 'integration', id }, { provider: input.provider, name: input.name, signing_secret_set: Boolean(input.signing_secret) });
        return created;
      });
      return present(row);
    },

    listIntegrations: async (actor: Principal) => ({ integrations: (await store.listIntegrations(db, actor.tenantId)).map(present) }),

    /** Sets or rotates the secret; "" removes it (the integration then accepts unsigned deliveries, unless the deployment refuses them). */
    async setSigningSecret(actor: Principal, id: string, secret: string) {
      return db.transaction().execute(async (tx) => {
        const row = await store.setSigningSecret(tx, actor.tenantId, id, sealed(actor.tenantId, id, secret || undefined));
        if (!row) throw notFound('integration');
        await audit.record(tx, actor, secret ? 'integration.signing_secret_set' : 'integration.signing_secret_removed', { type: 'integration', id }, { provider: row.provider });
        return present(row);
      });
    },

    async deleteIntegration(actor: Principal, id: string) {
      await db.transaction().execute(async (tx) => {
        if (!(await store.deleteIntegration(tx, actor.tenantId, id))) throw notFound('integration');
        await audit.record(tx, actor, 'integration.deleted', { type: 'integration', id }, {});
      });
    },

    async receive(provider: string, integrationId: string, raw: Buffer, headers: WebhookHeaders): Promise<HandlerResult> {
      // An integration is of exactly one of the three providers: any other path segment cannot match it.
      const integration = await store.integrationForIntake(db, integrationId);
      if (!integration || integration.provider !== provider) throw notFound('integration');
      if (!isJson(headers['content-type'])) {
        throw refuse('unsupported_media_type', 'Send the provider payload as application/json.');
      }
      // The signature is checked over the bytes exactly as received, before anything is parsed.
      if (integration.signing_secret_sealed) {
        const secret = sealer.open(integration.signing_secret_sealed, ctx(integration.tenant_id, integration.id));
        if (!verifySignature(integration.provider, secret, headers, raw, new Date()).ok) throw signatureInvalid();
      } else if (config.WEBHOOKS_REQUIRE_SIGNATURE) {
        throw refuse('signature_required', 'This deployment accepts only signed webhooks; set a signing secret on the integration and in the provider.');
      }
      // The same depth rule as every JSON body, checked on the bytes before JSON.parse builds anything.
      const scanned = scanJson(raw);
      if (scanned === 'too_deep' || scanned === 'too_many') throw jsonTooComplex(scanned);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        throw validationFailed([{ path: '(body)', message: 'malformed JSON' }], 'The body is not valid JSON.');
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        throw refuse('webhook_payload_invalid', 'The payload must be a JSON object.');
      }
      const inspected = scanned === 'clean' ? { tooDeep: false, errors: [] } : inspectJson(body, 'body');
      if (inspected.tooDeep) throw jsonTooComplex('too_deep');
      if (inspected.errors.length > 0) {
        throw new DomainError('webhook_payload_invalid', 'The payload contains a NUL character or an unpaired surrogate, which cannot be stored.', { errors: inspected.errors });
      }
      const classified = classify(integration.provider, headers, body as Record<string, unknown>, raw);
      if (classified.kind === 'invalid') throw refuse('webhook_payload_invalid', `Not a readable ${provider} ticket event: ${classified.reason}.`);
      // Throttled only once the delivery is known to be worth writing; a throttled one never enters the ledger.
      await throttle(integration.id);
      if (classified.kind === 'ignored') return { body: { status: 'ignored', ...(classified.challenge !== undefined ? { challenge: classified.challenge } : {}) } };
      await bus.ready().catch(() => {
        throw dependencyUnavailable('Redis');
      });
      const id = coalescer.newId();
      const answer = await coalescer.submit({
        id,
        tenant_id: integration.tenant_id,
        integration_id: integration.id,
        dedupe_key: classified.dedupeKey,
        provider_event_id: classified.providerEventId,
        external_ticket_id: classified.externalTicketId,
        type: classified.type,
        occurred_at: classified.occurredAt,
        status: classified.status,
        subject: classified.subject,
        priority: classified.priority,
        requester: classified.requester,
        raw: raw.toString('utf8'),
      });
      if (answer === TIMED_OUT) {
        // Still recorded exactly once; the transcript shows it when the worker catches up.
        return { status: 202, body: { status: 'accepted', external_ticket_id: classified.externalTicketId } };
      }
      const result = answer as ItemResult;
      if (!result.ok) throw refusalOf(result);
      const value = result.value as WebhookResult;
      return { body: { status: 'ok', transcript_id: value.transcript_id, external_ticket_id: value.external_ticket_id }, duplicate: value.was_duplicate };
    },

    processBatch,

    async transcript(actor: Principal, id: string, page: { limit: number; offset: number }) {
      const t = await store.getTranscript(db, actor.tenantId, id);
      if (!t) throw notFound('transcript');
      const events = await store.listEvents(db, actor.tenantId, id, page);
      return {
        id: t.id,
        // The integration id selects the workspace on the public webhook route: only a caller who may list
        // integrations (admin, and a key scoped for admin-resources:read) sees it.
        ...(mayListIntegrations(actor) ? { integration_id: t.integration_id } : {}),
        provider: t.provider,
        external_ticket_id: t.external_ticket_id,
        event_count: t.event_count,
        created_at: iso(t.created_at),
        updated_at: iso(t.updated_at),
        limit: page.limit,
        offset: page.offset,
        events: events.map(presentEvent),
      };
    },

    async transcripts(actor: Principal, integrationId: string, page: { limit: number; offset: number }) {
      await integrationOf(actor, integrationId);
      const rows = await store.listTranscripts(db, actor.tenantId, integrationId, page);
      return {
        limit: page.limit,
        offset: page.offset,
        transcripts: rows.map((t) => ({
          id: t.id,
          external_ticket_id: t.external_ticket_id,
          event_count: t.event_count,
          created_at: iso(t.created_at),
          updated_at: iso(t.updated_at),
        })),
      };
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
