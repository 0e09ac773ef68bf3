import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { IntegrationRow } from '../../db/types';
import { createFieldSealer } from '../../lib/crypto';
import { notFound, refuse } from '../../lib/errors';
import { mayManageIntegrations, type Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { pageOf, type Cursor } from '../../lib/paging';
import { TRANSCRIPT_SORT } from './schemas';
import type { AuditService } from '../audit/service';
import { lockTenant } from '../workspaces/store';
import type { WebhookProviderId } from './providers';
import { integrationSecretContext } from './secrets';
import * as store from './store';
import { presentTranscriptEvent } from './present';

/** `https://x.test//` → `https://x.test` (an index walk: `/\/+$/` is quadratic on a long run of "/"). */
function withoutTrailingSlashes(url: string): string {
  let end = url.length;
  while (end > 0 && url[end - 1] === '/') end--;
  return url.slice(0, end);
}


/**
 * The integrations that receive webhooks from other helpdesks (Zendesk, Front, Help Scout), and the
 * transcripts their deliveries build. Intake itself is edge.ts (HTTP tier) and worker.ts (the batch job).
 */
export function createWebhookService(deps: { db: Db; config: ConfigSection<'webhooks' | 'secrets' | 'http'>; audit: AuditService }) {
  const { db, config, audit } = deps;
  const secrets = createFieldSealer(config.ENCRYPTION_KEYS, integrationSecretContext);

  const base = () => withoutTrailingSlashes(config.PUBLIC_BASE_URL ?? `http://localhost:${config.PORT}`);
  const present = (i: IntegrationRow) => ({
    id: i.id,
    provider: i.provider,
    name: i.name,
    signing_secret_set: i.signing_secret_sealed !== null,
    webhook_url: `${base()}/v1/webhooks/${i.provider}/${i.id}`,
    created_at: iso(i.created_at),
  });
  const sealed = (tenantId: string, id: string, secret: string | undefined) => (secret ? secrets.seal(tenantId, id, secret) : null);


  async function integrationOf(actor: Principal, id: string) {
    const row = await store.getIntegration(db, actor.tenantId, id);
    if (!row) throw notFound('integration');
    return row;
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


    async transcript(actor: Principal, id: string, page: { limit: number; offset: number }) {
      const t = await store.getTranscript(db, actor.tenantId, id);
      if (!t) throw notFound('transcript');
      const events = await store.listEvents(db, actor.tenantId, id, page);
      return {
        id: t.id,
        // The integration id selects the workspace on the public webhook route: only a caller who may list
        // integrations (admin, and a key scoped for admin-resources:read) sees it.
        ...(mayManageIntegrations(actor) ? { integration_id: t.integration_id } : {}),
        provider: t.provider,
        external_ticket_id: t.external_ticket_id,
        event_count: t.event_count,
        created_at: iso(t.created_at),
        updated_at: iso(t.updated_at),
        limit: page.limit,
        offset: page.offset,
        events: events.map(presentTranscriptEvent),
      };
    },

    async transcripts(actor: Principal, integrationId: string, page: { limit: number; after?: Cursor }) {
      await integrationOf(actor, integrationId);
      const rows = await store.listTranscripts(db, actor.tenantId, integrationId, page);
      return pageOf('transcripts', rows, page.limit, TRANSCRIPT_SORT, (t) => ({
        id: t.id,
        external_ticket_id: t.external_ticket_id,
        event_count: t.event_count,
        created_at: iso(t.created_at),
        updated_at: iso(t.updated_at),
      }));
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
