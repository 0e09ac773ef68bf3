import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { DomainError, notFound, payloadTooComplex, refuse } from '../../lib/errors';
import { parseJsonObject } from '../../lib/json-limits';
import { setLogTenant } from '../../lib/log-context';
import type { IntakeOutcome } from '../../intake/edge';
import { channelById } from '../channels/registry';
import type { ChannelService } from '../channels/service';
import * as channelStore from '../channels/store';
import type { IngestGateway } from '../ingest/edge';
import type { OutboundService } from '../outbound/service';
import { postmarkRecord, twilioStatus, whatsappStatuses, type DeliveryUpdate } from './statuses';
import { basicAuthValid, metaSignatureValid, parseForm, publicUrl, telegramSecretValid, twilioSignatureValid } from './verify';

/** The channels whose provider can post here, and who that provider is. */
export const HOOK_CHANNELS = ['sms', 'whatsapp', 'telegram', 'email'] as const;

/** Form fields one Twilio request may carry (an MMS with ten media is about forty). */
const MAX_FORM_FIELDS = 200;

const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>';

const signatureInvalid = (what: string) => refuse('hook_signature_invalid', `The ${what} is missing or does not match; nothing was recorded.`);
const notConfigured = (key: string, channel: string) =>
  refuse('hook_signature_invalid', `The ${channel} connection has no ${key}, so requests cannot be verified; set ${key} on the connection (PUT /v1/channels/${channel}).`);

/** A provider's JSON body, within the limits every JSON body has, as an object. */
const parsedObject = (value: unknown): Record<string, unknown> => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new DomainError('channel_payload_invalid', 'The body must be a JSON object.');
  return value as Record<string, unknown>;
};
const jsonObject = (raw: Buffer) => parseJsonObject(raw, (detail, errors) => new DomainError('channel_payload_invalid', detail, errors ? { errors } : {}));

const header = (headers: Record<string, string | string[] | undefined>, name: string) => {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
};

const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * Providers posting straight to the service (DESIGN.md §7): `POST /v1/hooks/{channel}/{inbound_token}` takes
 * each provider's webhook exactly as it sends it. The token names the workspace's connection; the request is
 * then verified the way that provider signs (Twilio HMAC-SHA1 over URL and parameters, Meta
 * X-Hub-Signature-256, Telegram's secret token header, Postmark's basic auth) before anything is read. Customer
 * messages go on through the channel's adapter into the ingest pipeline; status callbacks move replies' delivery.
 */
export function createProviderHooks(deps: {
  db: Db;
  config: ConfigSection<'http' | 'intake'>;
  channels: Pick<ChannelService, 'credentials' | 'tokenHash'>;
  ingest: Pick<IngestGateway, 'receiveParsed'>;
  outbound: Pick<OutboundService, 'applyStatuses'>;
}) {
  const { db, config, channels, ingest, outbound } = deps;

  /** The workspace and credentials an inbound token names, for this channel; 404 for anything else. */
  async function connection(channel: string, token: string) {
    const def = channelById(channel);
    if (!def || !(HOOK_CHANNELS as readonly string[]).includes(def.id)) throw notFound('channel');
    const hash = channels.tokenHash(token);
    const conn = await channelStore.crossTenantConnectionByToken(db, hash);
    if (!conn || conn.channel !== def.id) throw notFound('channel connection');
    setLogTenant(conn.tenant_id);
    const creds = await channels.credentials(conn.tenant_id, def.id);
    if (!creds) throw notFound('channel connection');
    return { def, tenantId: conn.tenant_id, tokenHash: hash.toString('hex'), values: creds.values };
  }

  /** Customer messages in the provider's payload, through the channel's adapter and the ingest pipeline. */
  async function intake(c: Awaited<ReturnType<typeof connection>>, payload: unknown): Promise<IntakeOutcome | undefined> {
    const parsed = c.def.adapter!.parse(payload);
    if (!parsed.ok) throw refuse('channel_payload_invalid', `The ${c.def.id} adapter cannot read this payload: ${parsed.reason}.`);
    if (parsed.messages.length === 0) return undefined;
    if (parsed.messages.length > config.INGEST_MAX_MESSAGES_PER_REQUEST) {
      throw payloadTooComplex([{ path: 'body', message: `the payload carries ${parsed.messages.length} messages; at most ${config.INGEST_MAX_MESSAGES_PER_REQUEST} are accepted per request` }]);
    }
    // The payload goes along for the files its messages carry (Postmark's parts are staged from it).
    return ingest.receiveParsed(c.def.id, c.tenantId, c.tokenHash, parsed.messages, payload);
  }

  const statuses = (c: Awaited<ReturnType<typeof connection>>, updates: DeliveryUpdate[]) => (updates.length > 0 ? outbound.applyStatuses(c.tenantId, c.def.id, updates) : Promise.resolve(0));

  /** What the provider is answered: the status it retries on (429, 5xx) passes through; otherwise its own success form. */
  const answer = (channel: string, outcome: IntakeOutcome | undefined, moved: number) => {
    if (outcome?.accepted) return { status: 200, ...(channel === 'sms' ? { text: { contentType: 'text/xml', body: EMPTY_TWIML } } : { body: { status: 'accepted' } }) };
    if (channel === 'sms') return { status: 200, text: { contentType: 'text/xml', body: EMPTY_TWIML } };
    const result = outcome?.body as Record<string, unknown> | undefined;
    return { status: 200, body: { status: 'ok', ...(result?.ticket_id ? { ticket_id: result.ticket_id } : {}), ...(moved > 0 ? { statuses_applied: moved } : {}) } };
  };

  return {
    async receive(channel: string, token: string, raw: { body: Buffer; json?: unknown; headers: Record<string, string | string[] | undefined>; url: { protocol: string; host: string; originalUrl: string } }) {
      const c = await connection(channel, token);
      const v = c.values;
      switch (c.def.id) {
        case 'sms': {
          const authToken = str(v.auth_token);
          if (!authToken) throw notConfigured('auth_token', 'sms');
          const form = parseForm(raw.body, { maxFields: MAX_FORM_FIELDS, maxBytes: config.BODY_LIMIT_BYTES });
          if (!form.ok) throw refuse('channel_payload_invalid', `The body is not a Twilio form post: ${form.reason}.`);
          if (!twilioSignatureValid(authToken, publicUrl(config.PUBLIC_BASE_URL, raw.url), form.fields, header(raw.headers, 'x-twilio-signature'))) throw signatureInvalid('X-Twilio-Signature');
          const status = twilioStatus(form.fields);
          if (status) return answer('sms', undefined, await statuses(c, [status]));
          // The adapter reads the form as its fields (a repeated field keeps its first value, as Twilio sends none).
          const fields = Object.fromEntries(Object.entries(form.fields).map(([k, val]) => [k, Array.isArray(val) ? val[0] : val]));
          return answer('sms', await intake(c, fields), 0);
        }
        case 'whatsapp': {
          const secret = str(v.app_secret);
          if (!secret) throw notConfigured('app_secret', 'whatsapp');
          if (!metaSignatureValid(secret, raw.body, header(raw.headers, 'x-hub-signature-256'))) throw signatureInvalid('X-Hub-Signature-256');
          const body = jsonObject(raw.body);
          const found = whatsappStatuses(body);
          if (!found.ok) throw refuse('channel_payload_invalid', `The whatsapp payload's statuses cannot be read: ${found.reason}.`);
          const moved = await statuses(c, found.updates);
          return answer('whatsapp', await intake(c, body), moved);
        }
        case 'telegram': {
          const secret = str(v.secret_token);
          if (!secret) throw notConfigured('secret_token', 'telegram');
          if (!telegramSecretValid(secret, header(raw.headers, 'x-telegram-bot-api-secret-token'))) throw signatureInvalid('X-Telegram-Bot-Api-Secret-Token');
          return answer('telegram', await intake(c, jsonObject(raw.body)), 0);
        }
        default: {
          // Postmark: the URL's token is the secret; with webhook credentials set, its basic auth is required too.
          const user = str(v.webhook_username);
          const password = str(v.webhook_password);
          if ((user || password) && !basicAuthValid({ username: user ?? '', password: password ?? '' }, header(raw.headers, 'authorization'))) throw signatureInvalid('basic authorization');
          // A large email was read as it arrived (its files' text already in the store): its JSON comes parsed.
          const body = raw.json !== undefined ? parsedObject(raw.json) : jsonObject(raw.body);
          const record = postmarkRecord(body);
          if (record) return answer('email', undefined, await statuses(c, [record]));
          // Opens, clicks and other records that are not delivery news: acknowledged, nothing written.
          if (typeof body.RecordType === 'string' && body.RecordType !== 'Inbound') return answer('email', undefined, 0);
          return answer('email', await intake(c, body), 0);
        }
      }
    },

    /** Meta's subscription handshake: the challenge echoed when the verify token is the connection's. */
    async handshake(channel: string, token: string, q: { 'hub.mode'?: string; 'hub.verify_token'?: string; 'hub.challenge'?: string }) {
      const c = await connection(channel, token);
      const expected = str(c.values.verify_token);
      if (c.def.id !== 'whatsapp') throw notFound();
      if (!expected) throw notConfigured('verify_token', 'whatsapp');
      // The verify token is a shared secret like Telegram's: the same constant-time comparison.
      if (q['hub.mode'] !== 'subscribe' || !telegramSecretValid(expected, q['hub.verify_token'])) throw refuse('hook_signature_invalid', 'hub.verify_token does not match the connection\'s verify_token.');
      return { status: 200, text: { contentType: 'text/plain', body: q['hub.challenge'] ?? '' } };
    },
  };
}

export type ProviderHooks = ReturnType<typeof createProviderHooks>;
