import { randomBytes } from 'node:crypto';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { ChannelConnectionRow } from '../../db/types';
import { DomainError, notFound, refuse } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { hashApiKeySecret } from '../../lib/secrets';
import { createFieldSealer } from '../../lib/crypto';
import { iso } from '../../lib/time';
import { findMisplacedCredential, MAX_ALLOWED_ORIGINS, normalOrigin, REDACTED, redactConfig } from './config';
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

/** A credential value: a non-empty string of sane length (a number or an object is a mistake to say, not to store). */
function checkedSecrets(def: ChannelDefinition, config: Record<string, unknown>): { plain: Record<string, unknown>; secrets: Record<string, string> } {
  const plain: Record<string, unknown> = {};
  const secrets: Record<string, string> = {};
  for (const [k, v] of Object.entries(config)) {
    if (!def.secret_config_keys.includes(k)) {
      plain[k] = v;
      continue;
    }
    if (typeof v !== 'string' || v.trim() === '' || v.length > 4096) {
      throw refuse('validation_failed', `${k} must be a non-empty string of at most 4096 characters.`, [{ path: `body.config.${k}`, message: 'must be a non-empty string' }]);
    }
    secrets[k] = v.trim();
  }
  return { plain, secrets };
}

/** Whether a connection can send a reply, and if not, what it lacks (said on every read). */
function sendability(def: ChannelDefinition, values: Record<string, unknown>, mailbox: boolean): { sendable: boolean; sendable_reason: string | null } {
  if (def.send_requires === null) return { sendable: false, sendable_reason: `No sender exists for ${def.display_name}: replies on this channel are stored, not sent.` };
  if (def.id === 'email' && mailbox) return { sendable: true, sendable_reason: null };
  const has = (k: string) => typeof values[k] === 'string' && (values[k] as string).trim() !== '';
  if (def.send_requires.length === 0 || def.send_requires.some((set) => set.every(has))) return { sendable: true, sendable_reason: null };
  const sets = def.send_requires.map((set) => set.filter((k) => !has(k)).join(', ')).join(' or ');
  const mailboxHint = def.id === 'email' ? ' (or connect a mailbox)' : '';
  return { sendable: false, sendable_reason: `Replies cannot be sent: config lacks ${sets}${mailboxHint}.` };
}

// Bound to workspace, channel and field: a sealed value copied to another row will not open.
export const channelFieldContext = (tenantId: string, channel: string, field: 'secrets' | 'inbound_token') => `channel:${tenantId}:${channel}:${field}`;

export function createChannelService(deps: { db: Db; config: ConfigSection<'secrets'> }) {
  const { db, config } = deps;
  const tokenHash = (token: string) => hashApiKeySecret(config.API_KEY_PEPPER, token);
  const sealer = createFieldSealer(config.ENCRYPTION_KEYS, channelFieldContext);

  /** The connection's credentials: sealed ones, over any a connection made before 0034 kept in its config. */
  function secretsOf(tenantId: string, def: ChannelDefinition, row: { config: Record<string, unknown>; secrets_sealed: string | null }): Record<string, string> {
    const legacy = Object.fromEntries(def.secret_config_keys.filter((k) => typeof row.config[k] === 'string').map((k) => [k, row.config[k] as string]));
    const sealed = row.secrets_sealed ? (JSON.parse(sealer.open(tenantId, def.id, 'secrets', row.secrets_sealed)) as Record<string, string>) : {};
    return { ...legacy, ...sealed };
  }

  const present = async (def: ChannelDefinition, row: ChannelConnectionRow, details: Record<string, unknown> = {}) => {
    const secrets = secretsOf(row.tenant_id, def, row);
    const values = { ...row.config, ...secrets };
    return {
      ...registryView(def),
      display_name: row.display_name,
      details: { inbound_token_set: true, ...details },
      connected: true,
      enabled: row.enabled,
      ...sendability(def, values, def.id === 'email' && (await store.mailboxSends(db, row.tenant_id))),
      // Credentials read back as *** like every other value that is not a descriptor.
      config: redactConfig(values, def.safe_config_keys),
      created_at: iso(row.created_at),
      updated_at: iso(row.updated_at),
    };
  };

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
      const token = newInboundToken();
      await db.transaction().execute((tx) =>
        store.insertIfAbsent(tx, tenantId, { channel: def.id, display_name: def.display_name, inbound_token_hash: tokenHash(token), inbound_token_sealed: sealer.seal(tenantId, def.id, 'inbound_token', token) }),
      );
    },

    async upsert(actor: Principal, channel: string, input: UpsertChannelInput) {
      const def = definition(channel);
      const misplaced = findMisplacedCredential(input.config);
      if (misplaced) {
        throw new DomainError('channel_credential_misplaced', `An OAuth token does not belong in a channel config (found at ${misplaced}); connect the mailbox with POST /v1/channels/email/oauth/{mailprovider}/complete, which stores tokens encrypted.`, { errors: [{ path: `body.${misplaced}`, message: 'OAuth token' }] });
      }
      const config = 'allowed_origins' in input.config ? { ...input.config, allowed_origins: checkedOrigins(input.config.allowed_origins) } : input.config;
      const { plain, secrets } = checkedSecrets(def, config);
      const token = newInboundToken();
      const row = await db.transaction().execute(async (tx) => {
        // A credential written back as the "***" a read shows keeps the stored one: a form that round-trips
        // the config must not replace a working token with three asterisks.
        const kept = Object.values(secrets).includes(REDACTED) ? await store.connectionFor(tx, actor.tenantId, def.id, true) : undefined;
        const stored = kept ? secretsOf(actor.tenantId, def, kept) : {};
        for (const [k, v] of Object.entries(secrets)) if (v === REDACTED && stored[k] !== undefined) secrets[k] = stored[k]!;
        return store.upsertConnection(tx, actor.tenantId, {
          channel: def.id,
          display_name: input.display_name ?? def.display_name,
          enabled: input.enabled,
          config: plain,
          secrets_sealed: Object.keys(secrets).length > 0 ? sealer.seal(actor.tenantId, def.id, 'secrets', JSON.stringify(secrets)) : null,
          inbound_token_hash: tokenHash(token),
          inbound_token_sealed: sealer.seal(actor.tenantId, def.id, 'inbound_token', token),
        });
      });
      // The token is shown once, when the connection is created; later writes keep the stored one.
      return present(def, row, row.inserted ? { inbound_token: token } : {});
    },

    async list(actor: Principal) {
      const rows = new Map((await store.listConnections(db, actor.tenantId)).map((r) => [r.channel, r]));
      return {
        channels: await Promise.all(
          Object.values(CHANNELS).map(async (def) => {
            const row = rows.get(def.id);
            return { ...registryView(def), connected: row !== undefined, connection: row ? await present(def, row) : null };
          }),
        ),
      };
    },

    async rotateToken(actor: Principal, channel: string) {
      const def = definition(channel);
      const token = newInboundToken();
      // Row, old route and new route change together: the old token stops and the new one starts at commit.
      if (!(await db.transaction().execute((tx) => store.setTokenHash(tx, actor.tenantId, def.id, tokenHash(token), sealer.seal(actor.tenantId, def.id, 'inbound_token', token))))) throw notFound('channel connection');
      return { channel: def.id, inbound_token: token };
    },

    /**
     * What a sender or a provider hook needs of a workspace's connection: its config with the credentials
     * opened, and its inbound token (null for a connection made before tokens were sealed, until rotated).
     * Undefined when the channel is not connected.
     */
    async credentials(tenantId: string, channel: string): Promise<{ enabled: boolean; values: Record<string, unknown>; inboundToken: string | null } | undefined> {
      const def = definition(channel);
      const row = await store.connectionFor(db, tenantId, def.id);
      if (!row) return undefined;
      return {
        enabled: row.enabled,
        values: { ...row.config, ...secretsOf(tenantId, def, row) },
        inboundToken: row.inbound_token_sealed ? sealer.open(tenantId, def.id, 'inbound_token', row.inbound_token_sealed) : null,
      };
    },
  };
}

export type ChannelService = ReturnType<typeof createChannelService>;
