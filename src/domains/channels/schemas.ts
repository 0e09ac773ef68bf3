import { z } from 'zod';
import { CHANNEL_IDS, TICKET_SOURCES } from './registry';

const CONFIG = {
  label: 'Website widget',
  widget_color: '#0b6efd',
  greeting: 'Hi! Ask us anything about your order.',
  allowed_origins: ['https://www.northwind.example'],
};
const INBOUND_TOKEN = 'itk_Qm9yZWFsLWV4YW1wbGUtdG9rZW4tMDE5Mw';
const at = z.string().meta({ examples: ['2025-02-28T15:20:00.000Z'] });

export const channelParams = z.object({ channel: z.string().min(1).max(64).meta({ examples: ['web_chat'] }) });

export const upsertChannelBody = z.strictObject({
  enabled: z.boolean().default(true),
  display_name: z.string().trim().min(1).max(120).optional().meta({ examples: ['Website chat'] }),
  config: z
    .record(z.string(), z.unknown())
    .refine((c) => JSON.stringify(c).length <= 32_768, { message: 'config must serialise to at most 32 KiB' })
    .meta({ examples: [CONFIG] }),
});
export type UpsertChannelInput = z.output<typeof upsertChannelBody>;

const registryFields = {
  channel: z.enum(CHANNEL_IDS).meta({ examples: ['web_chat'] }),
  display_name: z.string().meta({ examples: ['Website chat'] }),
  adapter_available: z.boolean(),
  ticket_source: z.enum(TICKET_SOURCES).meta({ examples: ['web_chat'] }),
  handle_kind: z.string().meta({ examples: ['visitor_id'] }),
  outbound_supported: z.boolean(),
  inbound_path: z.string().meta({ examples: ['/v1/ingest/web_chat'] }),
};

export const channelConnection = z.object({
  ...registryFields,
  details: z.record(z.string(), z.unknown()).meta({ examples: [{ inbound_token_set: true }] }),
  connected: z.boolean(),
  enabled: z.boolean(),
  sendable: z.boolean().meta({ description: 'Whether a reply on this channel can be sent now: a sender exists and the connection holds what it needs.' }),
  sendable_reason: z.string().nullable().meta({ description: 'When sendable is false, what is missing; null otherwise.', examples: ['Replies cannot be sent: config lacks bot_token.'] }),
  config: z.record(z.string(), z.unknown()).meta({ examples: [CONFIG] }),
  created_at: at,
  updated_at: at,
}).meta({ id: 'ChannelConnection' });

export const channelListItem = z.object({
  ...registryFields,
  connected: z.boolean(),
  connection: channelConnection.nullable(),
}).meta({ id: 'Channel' });

export const channelList = z.object({ channels: z.array(channelListItem) });
export const rotatedToken = z.object({ channel: z.string().meta({ examples: ['web_chat'] }), inbound_token: z.string().meta({ examples: [INBOUND_TOKEN] }) });
