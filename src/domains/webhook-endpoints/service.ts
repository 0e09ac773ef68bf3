import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import type { WebhookEndpointRow } from '../../db/types';
import { createFieldSealer } from '../../lib/crypto';
import { notFound, refuse } from '../../lib/errors';
import { newId } from '../../lib/ids';
import { pageOf, type Cursor } from '../../lib/paging';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import type { AuditService } from '../audit/service';
import { EVENT_TYPES } from '../events/types';
import type { Principal } from '../identity/principal';
import { ATTEMPT_SORT, type CreateEndpointInput, type PatchEndpointInput } from './schemas';
import { newSecret } from './signing';
import { literalRefused } from './transport';
import * as store from './store';
import { lockTenant } from '../workspaces/store';

const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);
const KNOWN_TYPES = new Set<string>(EVENT_TYPES);

/**
 * Endpoint secrets are sealed at rest (AES-GCM under ENCRYPTION_KEYS, createFieldSealer) and bound to their
 * workspace and endpoint, so a sealed value copied onto another row does not open. The previous secret of a
 * rotation is sealed under the same binding.
 */
export const endpointSecretContext = (tenantId: string, id: string) => `webhook-endpoint:${tenantId}:${id}:secret`;

/** The endpoint's circuit breaker as its read shows it: open (nothing sent until), probing (one event at a time), or closed. */
function circuitOf(e: WebhookEndpointRow) {
  const open = e.circuit_open_until !== null && e.circuit_open_until.getTime() > Date.now();
  return { circuit: open ? ('open' as const) : e.circuit_opens > 0 ? ('probing' as const) : ('closed' as const), circuit_open_until: open ? iso(e.circuit_open_until!) : null };
}

/** The read of an endpoint: never its secrets. */
export const presentEndpoint = (e: WebhookEndpointRow) => ({
  id: e.id,
  url: e.url,
  description: e.description,
  event_types: e.event_types as (typeof EVENT_TYPES)[number][],
  enabled: e.enabled,
  disabled_reason: e.disabled_reason,
  consecutive_failures: e.consecutive_failures,
  previous_secret_expires_at: e.previous_secret_expires_at && e.previous_secret_expires_at.getTime() > Date.now() ? iso(e.previous_secret_expires_at) : null,
  ...circuitOf(e),
  created_at: iso(e.created_at),
  updated_at: iso(e.updated_at),
});

/**
 * Webhook endpoints (issue 19): where a workspace's events are POSTed, signed per Standard Webhooks. This
 * is management; sending is delivery.ts on the worker.
 */
export function createWebhookEndpointService(deps: { db: Db; config: ConfigSection<'outboundWebhooks' | 'secrets'>; audit: AuditService; queues: QueueHub }) {
  const { db, config, audit, queues } = deps;
  const secrets = createFieldSealer(config.ENCRYPTION_KEYS, endpointSecretContext);

  /** https only; http only to loopback, and only where the deployment says so (development). */
  function checkUrl(raw: string): string {
    const url = new URL(raw);
    const loopbackHttp = url.protocol === 'http:' && config.OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK && LOOPBACK.has(url.hostname);
    if (url.protocol !== 'https:' && !loopbackHttp) {
      throw refuse(
        'endpoint_url_refused',
        config.OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK ? 'The endpoint URL must be https:// (http:// is allowed only for 127.0.0.1, ::1 and localhost).' : 'The endpoint URL must be https://.',
      );
    }
    // Names are checked when they resolve, at every send (transport.ts); an IP literal can be judged now.
    if (literalRefused(url, { allowLoopback: config.OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK, allowPrivate: config.OUTBOUND_WEBHOOK_ALLOW_PRIVATE_NETWORKS })) {
      throw refuse('endpoint_url_refused', 'The endpoint URL names an address this deployment does not deliver to (loopback, private or special-purpose).');
    }
    return raw;
  }

  function checkTypes(types: string[]): string[] {
    const unknown = types.filter((t) => !KNOWN_TYPES.has(t));
    if (unknown.length > 0) throw refuse('event_type_unknown', `Unknown event type(s): ${unknown.slice(0, 5).join(', ')}; the types are ${EVENT_TYPES.join(', ')}.`);
    return [...new Set(types)];
  }

  const wake = (tenantId: string, endpointId: string) => queues.enqueue('events.deliver', { tenant_id: tenantId, endpoint_id: endpointId });

  async function locked(tx: Executor, actor: Principal, id: string) {
    const row = await store.getEndpoint(tx, actor.tenantId, id, { lock: true });
    if (!row) throw notFound('webhook endpoint');
    return row;
  }

  return {
    async create(actor: Principal, input: CreateEndpointInput) {
      const url = checkUrl(input.url);
      const types = checkTypes(input.event_types);
      const id = newId();
      const secret = newSecret();
      const enabled = input.enabled ?? true;
      const row = await db.transaction().execute(async (tx) => {
        // Counted under the workspace's lock, so concurrent creations cannot pass the cap together.
        await lockTenant(tx, actor.tenantId);
        if ((await store.countEndpoints(tx, actor.tenantId)) >= config.OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE) {
          throw refuse('endpoint_limit_reached', `A workspace can hold at most ${config.OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE} webhook endpoints; delete one first.`);
        }
        const created = await store.insertEndpoint(tx, actor.tenantId, { id, url, description: input.description ?? '', event_types: types, enabled, secret_sealed: secrets.seal(actor.tenantId, id, secret) });
        await audit.record(tx, actor, 'endpoint.created', { type: 'webhook_endpoint', id }, { url, event_types: types, enabled });
        return created;
      });
      return { ...presentEndpoint(row), secret };
    },

    list: async (actor: Principal) => ({ webhook_endpoints: (await store.listEndpoints(db, actor.tenantId)).map(presentEndpoint) }),

    /** Enabling again clears the failure count and resumes what was pending; disabling is audited either way. */
    async update(actor: Principal, id: string, patch: PatchEndpointInput) {
      const url = patch.url === undefined ? undefined : checkUrl(patch.url);
      const types = patch.event_types === undefined ? undefined : checkTypes(patch.event_types);
      const { row, enabledNow } = await db.transaction().execute(async (tx) => {
        const before = await locked(tx, actor, id);
        const toggled = patch.enabled !== undefined && patch.enabled !== before.enabled;
        // Disabled, it keeps what it was owed so far (parked, sent once it is enabled again) and is owed
        // nothing that commits meanwhile: enabling moves its cursor to the log's end.
        if (toggled) await (patch.enabled ? store.skipToLogEnd(tx, actor.tenantId, id) : store.parkBacklog(tx, actor.tenantId, id));
        const row = (await store.updateEndpoint(tx, actor.tenantId, id, {
          ...(url !== undefined ? { url } : {}),
          ...(types !== undefined ? { event_types: types } : {}),
          ...(patch.description !== undefined ? { description: patch.description } : {}),
          ...(toggled ? { enabled: patch.enabled!, disabled_reason: patch.enabled ? null : 'admin', consecutive_failures: 0 } : {}),
        }))!;
        const changed = Object.keys(patch).filter((k) => k !== 'enabled');
        if (changed.length > 0) await audit.record(tx, actor, 'endpoint.updated', { type: 'webhook_endpoint', id }, { fields: changed, ...(url ? { url } : {}), ...(types ? { event_types: types } : {}) });
        if (toggled) await audit.record(tx, actor, patch.enabled ? 'endpoint.enabled' : 'endpoint.disabled', { type: 'webhook_endpoint', id }, { reason: 'admin' });
        return { row, enabledNow: toggled && patch.enabled === true };
      });
      if (enabledNow) await wake(actor.tenantId, id);
      return presentEndpoint(row);
    },

    async remove(actor: Principal, id: string) {
      await db.transaction().execute(async (tx) => {
        const row = await locked(tx, actor, id);
        await store.deleteEndpoint(tx, actor.tenantId, id);
        await audit.record(tx, actor, 'endpoint.deleted', { type: 'webhook_endpoint', id }, { url: row.url });
      });
    },

    /**
     * A new secret, shown once. The one it replaces keeps signing beside it for OUTBOUND_WEBHOOK_SECRET_OVERLAP_SECONDS,
     * so receivers can switch without losing a delivery; a second rotation within the overlap drops the oldest.
     */
    async rotateSecret(actor: Principal, id: string) {
      const secret = newSecret();
      const row = await db.transaction().execute(async (tx) => {
        const before = await locked(tx, actor, id);
        const overlap = config.OUTBOUND_WEBHOOK_SECRET_OVERLAP_SECONDS;
        const row = (await store.updateEndpoint(tx, actor.tenantId, id, {
          secret_sealed: secrets.seal(actor.tenantId, id, secret),
          previous_secret_sealed: overlap > 0 ? before.secret_sealed : null,
          previous_secret_expires_at: overlap > 0 ? new Date(Date.now() + overlap * 1000) : null,
        }))!;
        await audit.record(tx, actor, 'endpoint.secret_rotated', { type: 'webhook_endpoint', id }, { overlap_seconds: overlap });
        return row;
      });
      return { ...presentEndpoint(row), secret };
    },

    async deliveries(actor: Principal, id: string, page: { limit: number; after?: Cursor }) {
      if (!(await store.getEndpoint(db, actor.tenantId, id))) throw notFound('webhook endpoint');
      const rows = await store.listAttempts(db, actor.tenantId, id, page);
      return pageOf('deliveries', rows, page.limit, ATTEMPT_SORT, (a) => ({
        id: a.id,
        event_id: a.event_id,
        event_type: a.event_type as (typeof EVENT_TYPES)[number],
        attempt: a.attempt,
        outcome: a.outcome,
        status_code: a.status_code,
        duration_ms: a.duration_ms,
        error: a.error,
        next_retry_at: a.next_retry_at ? iso(a.next_retry_at) : null,
        created_at: iso(a.created_at),
      }));
    },

    /** Queues the endpoint's events since a time again: the same event ids, new attempts. */
    async replay(actor: Principal, id: string, since: string) {
      const replayed = await db.transaction().execute(async (tx) => {
        const row = await locked(tx, actor, id);
        if (!row.enabled) throw refuse('endpoint_disabled', 'This endpoint is disabled; enable it (PATCH enabled: true) before replaying events to it.');
        const n = await store.requeueSince(tx, actor.tenantId, id, new Date(since), row.event_types);
        await audit.record(tx, actor, 'endpoint.replayed', { type: 'webhook_endpoint', id }, { since, events: n });
        return n;
      });
      if (replayed > 0) await wake(actor.tenantId, id);
      return { replayed };
    },
  };
}

export type WebhookEndpointService = ReturnType<typeof createWebhookEndpointService>;
