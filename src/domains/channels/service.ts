import { randomBytes } from 'node:crypto';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { ChannelConnectionRow } from '../../db/types';
import { DomainError, notFound, refuse } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { hashApiKeySecret } from '../../lib/secrets';
import { iso } from '../../lib/time';
import { findMisplacedCredential, MAX_ALLOWED_ORIGINS, normalOrigin, redactConfig } from './config';
import { CHANNELS, channelById, inboundPath, type ChannelDefinition } from './registry';
import type { UpsertChannelInput } from './schemas';
import * as store from './store';

const registryView = (c: ChannelDefinition) => ({
  channel: c.id,
  display_name: c.display_name,
  adapter_available: c.adapter !== null,
  ticket_source: c.ticket_source,
  handle_kind: c.handle_kind,
  outbound_supported: c.outbound_supported,
  inbound_path: inboundPath(c.id),
});

const newInboundToken = () => `itk_${randomBytes(24).toString('base64url')}`;

/**
 * `allowed_origins` as stored: each an origin (normalOrigin), at most MAX_ALLOWED_ORIGINS; anything else is
 * refused naming the entry, never stored (a stored `null` let any sandboxed page post as the widget).
 */
function checkedOrigins(value: unknown): string[] {
  const refuseAt = (path: string, message: string) => refuse('validation_failed', 'allowed_origins must list origins such as https://www.example.com[:port].', [{ path, message }]);
  if (!Array.isArray(value)) throw refuseAt('body.config.allowed_origins', 'must be an array of origins');
  if (value.length > MAX_ALLOWED_ORIGINS) throw refuseAt('body.config.allowed_origins', `at most ${MAX_ALLOWED_ORIGINS} origins`);
  return value.map((o, i) => {
    const origin = typeof o === 'string' ? normalOrigin(o.trim()) : null;
    if (origin === null) throw refuseAt(`body.config.allowed_origins.${i}`, 'must be an http(s) origin: scheme, host and optional port, no path (not null, not *)');
    return origin;
  });
}

export function createChannelService(deps: { db: Db; config: ConfigSection<'secrets'> }) {
  const { db, config } = deps;
  const tokenHash = (token: string) => hashApiKeySecret(config.API_KEY_PEPPER, token);

  const present = (def: ChannelDefinition, row: ChannelConnectionRow, details: Record<string, unknown> = {}) => ({
    ...registryView(def),
    display_name: row.display_name,
    details: { inbound_token_set: true, ...details },
    connected: true,
    enabled: row.enabled,
    config: redactConfig(row.config, def.safe_config_keys),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });

  function definition(channel: string): ChannelDefinition {
    const def = channelById(channel);
    if (!def) throw notFound('channel');
    return def;
  }

  return {
    /**
     * Whether a browser at `origin` may post to the web chat connection holding `token`: its `allowed_origins`
     * (exact scheme, host and port, compared case-insensitively). Unknown tokens allow nothing.
     */
    async webChatOriginAllowed(token: string, origin: string): Promise<boolean> {
      const wanted = normalOrigin(origin);
      // A value stored before origins were checked at write (`null`, `*`) matches nothing.
      return wanted !== null && (await store.crossTenantWebChatOrigins(db, tokenHash(token))).some((o) => normalOrigin(o.trim()) === wanted);
    },
    tokenHash,

    /**
     * Connects the channel for the workspace if it has no connection (enabled, empty config, a fresh inbound
     * token nobody has seen — rotate to get one). An existing connection, even a disabled one, is left alone.
     */
    async ensure(tenantId: string, channel: string) {
      const def = definition(channel);
      // The row and its token's route together (routes, 0029).
      await db.transaction().execute((tx) => store.insertIfAbsent(tx, tenantId, { channel: def.id, display_name: def.display_name, inbound_token_hash: tokenHash(newInboundToken()) }));
    },

    async upsert(actor: Principal, channel: string, input: UpsertChannelInput) {
      const def = definition(channel);
      const misplaced = findMisplacedCredential(input.config);
      if (misplaced) {
        throw new DomainError('channel_credential_misplaced', `An OAuth token does not belong in a channel config (found at ${misplaced}); connect the mailbox with POST /v1/channels/email/oauth/{mailprovider}/complete, which stores tokens encrypted.`, { errors: [{ path: `body.${misplaced}`, message: 'OAuth token' }] });
      }
      const config = 'allowed_origins' in input.config ? { ...input.config, allowed_origins: checkedOrigins(input.config.allowed_origins) } : input.config;
      const token = newInboundToken();
      const row = await db.transaction().execute((tx) =>
        store.upsertConnection(tx, actor.tenantId, {
          channel: def.id,
          display_name: input.display_name ?? def.display_name,
          enabled: input.enabled,
          config,
          inbound_token_hash: tokenHash(token),
        }),
      );
      // The token is shown once, when the connection is created; later writes keep the stored one.
      return present(def, row, row.inserted ? { inbound_token: token } : {});
    },

    async list(actor: Principal) {
      const rows = new Map((await store.listConnections(db, actor.tenantId)).map((r) => [r.channel, r]));
      return {
        channels: Object.values(CHANNELS).map((def) => {
          const row = rows.get(def.id);
          return { ...registryView(def), connected: row !== undefined, connection: row ? present(def, row) : null };
        }),
      };
    },

    async rotateToken(actor: Principal, channel: string) {
      const def = definition(channel);
      const token = newInboundToken();
      // Row, old route and new route change together: the old token stops and the new one starts at commit.
      if (!(await db.transaction().execute((tx) => store.setTokenHash(tx, actor.tenantId, def.id, tokenHash(token))))) throw notFound('channel connection');
      return { channel: def.id, inbound_token: token };
    },
  };
}

export type ChannelService = ReturnType<typeof createChannelService>;
