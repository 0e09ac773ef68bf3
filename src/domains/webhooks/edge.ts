import type { RedisClient } from '../../queue/connection';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { createIntakeEdge, type IntakeOutcome } from '../../intake/edge';
import type { Lanes } from '../../intake/priority/lanes';
import { createFieldSealer } from '../../lib/crypto';
import { DomainError, notFound, refuse } from '../../lib/errors';
import { parseJsonObject } from '../../lib/json-limits';
import { setLogTenant } from '../../lib/log-context';
import type { QueueHub } from '../../queue/hub';
import type { ItemResult, ResultBus } from '../../queue/results';
import { classify, verifySignature, type WebhookHeaders } from './providers';
import { integrationSecretContext } from './secrets';
import * as store from './store';
import type { WebhookItem, WebhookResult } from './worker';

const isJson = (contentType: string | string[] | undefined) => {
  const type = String(Array.isArray(contentType) ? contentType[0] : (contentType ?? '')).split(';')[0]!.trim().toLowerCase();
  return type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type);
};

const signatureInvalid = () => refuse('signature_invalid', 'The webhook signature is missing, does not match the body, or is outside the accepted time window.');

/**
 * The HTTP side of POST /v1/webhooks/{provider}/{integration_id}: the integration, the content type, the
 * signature over the raw bytes, the JSON limits, the classification and the throttle, all without writing;
 * ticket events are then coalesced into `webhooks.batch` jobs (see worker.ts).
 */
export function createWebhookEdge(deps: { db: Db; config: ConfigSection<'webhooks' | 'secrets' | 'redis' | 'http'>; redis: RedisClient; queues: QueueHub; bus: ResultBus; lanes: Lanes }) {
  const { db, config, queues } = deps;
  const secrets = createFieldSealer(config.ENCRYPTION_KEYS, integrationSecretContext);
  const edge = createIntakeEdge<WebhookItem>({
    redis: deps.redis,
    bus: deps.bus,
    budget: { keyPrefix: `${config.REDIS_PREFIX}:throttle:webhooks`, points: config.INBOUND_WEBHOOK_RATE_POINTS, windowSeconds: config.INBOUND_WEBHOOK_RATE_WINDOW_SECONDS, what: 'integration' },
    batch: { max: config.INBOUND_WEBHOOK_BATCH_MAX, windowMs: config.INBOUND_WEBHOOK_BATCH_WINDOW_MS },
    waitMs: config.JOB_WAIT_MS,
    shards: config.INTAKE_QUEUE_SHARDS,
    lanes: deps.lanes,
    send: (items, replyTo, { bulk, ...opts }) => queues.enqueue('webhooks.batch', { reply_to: replyTo, ...(bulk ? { bulk } : {}), items }, opts),
  });

  return {
    async receive(provider: string, integrationId: string, raw: Buffer, headers: WebhookHeaders): Promise<IntakeOutcome> {
      // An integration is of exactly one of the three providers: any other path segment cannot match it.
      const integration = await store.crossTenantIntegrationForIntake(db, integrationId);
      if (!integration || integration.provider !== provider) throw notFound('integration');
      setLogTenant(integration.tenant_id);
      if (!isJson(headers['content-type'])) {
        throw refuse('unsupported_media_type', 'Send the provider payload as application/json.');
      }
      // The signature is checked over the bytes exactly as received, before anything is parsed.
      if (integration.signing_secret_sealed) {
        const secret = secrets.open(integration.tenant_id, integration.id, integration.signing_secret_sealed);
        if (!verifySignature(integration.provider, secret, headers, raw, new Date()).ok) throw signatureInvalid();
      } else if (config.INBOUND_WEBHOOK_REQUIRE_SIGNATURE) {
        throw refuse('signature_required', 'This deployment accepts only signed webhooks; set a signing secret on the integration and in the provider.');
      }
      // The same depth rule as every JSON body, checked on the bytes before JSON.parse builds anything.
      const body = parseJsonObject(raw, (detail, errors) => new DomainError('webhook_payload_invalid', detail, errors ? { errors } : {}));
      const classified = classify(integration.provider, headers, body, raw);
      if (classified.kind === 'invalid') throw refuse('webhook_payload_invalid', `Not a readable ${provider} ticket event: ${classified.reason}.`);
      // Charged only once the delivery is known to be worth writing, by the rule every intake follows
      // (src/limits/intake.ts): a non-ticket event writes nothing and costs nothing, as a channel's receipts do.
      if (classified.kind === 'ignored') {
        return { body: { status: 'ignored', ...(classified.challenge !== undefined ? { challenge: classified.challenge } : {}) } };
      }
      // Its workspace's lane first (in memory: it waits while the workspace already has its share queued), then
      // the integration's budget (a throttled delivery never enters the ledger, so its replay is new).
      const { release, bulk } = await edge.enter(integration.tenant_id, 1);
      try {
        const charge = await edge.charge(integration.id);
        const submitted = await edge.submit([{
          id: edge.newId(),
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
        }], { bulk });
        // What was not written goes back: a refused event, or a redelivery the ledger already had.
        await charge.settle(submitted);
        if (submitted.accepted) {
          // Still recorded exactly once; the transcript shows it when the worker catches up.
          return { accepted: true, body: { status: 'accepted', external_ticket_id: classified.externalTicketId } };
        }
        const [result] = submitted.results as [ItemResult];
        if (!result.ok) throw edge.refusalOf(result);
        const value = result.value as WebhookResult;
        return { body: { status: 'ok', transcript_id: value.transcript_id, external_ticket_id: value.external_ticket_id }, duplicate: value.was_duplicate };
      } finally {
        release();
      }
    },

  };
}

export type WebhookEdge = ReturnType<typeof createWebhookEdge>;
