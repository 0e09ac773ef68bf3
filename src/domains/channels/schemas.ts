import { z } from 'zod';

export const channelParams = z.object({ channel: z.string().min(1).max(64) });

export const upsertChannelBody = z.strictObject({
  enabled: z.boolean().default(true),
  display_name: z.string().trim().min(1).max(120).optional(),
  config: z.record(z.string(), z.unknown()).refine((c) => JSON.stringify(c).length <= 32_768, { message: 'config must serialise to at most 32 KiB' }),
});
export type UpsertChannelInput = z.output<typeof upsertChannelBody>;

const registryFields = {
  channel: z.string(),
  display_name: z.string(),
  adapter_available: z.boolean(),
  ticket_source: z.string(),
  handle_kind: z.string(),
  outbound_supported: z.boolean(),
  inbound_path: z.string(),
};

export const channelConnection = z.object({
  ...registryFields,
  details: z.record(z.string(), z.unknown()),
  connected: z.boolean(),
  enabled: z.boolean(),
  config: z.record(z.string(), z.unknown()),
  created_at: z.string(),
  updated_at: z.string(),
});

export const channelListItem = z.object({
  ...registryFields,
  connected: z.boolean(),
  connection: channelConnection.nullable(),
});

export const channelList = z.object({ channels: z.array(channelListItem) });
export const rotatedToken = z.object({ channel: z.string(), inbound_token: z.string() });
