import { z } from 'zod';

export const mailProviderParams = z.object({ mailprovider: z.string().min(1).max(32) });

export const completeOauthBody = z.strictObject({
  code: z.string().min(1).max(4096),
  state: z.string().min(1).max(512),
});

export const oauthStart = z.object({
  authorize_url: z.string(),
  state: z.string(),
  expires_at: z.string(),
});

const check = z.object({
  check: z.enum(['oauth_token', 'scopes', 'send_permission', 'inbound_polling', 'daily_send_quota']),
  status: z.enum(['ok', 'warning', 'failing', 'unknown']),
  detail: z.string(),
  remediation: z.string(),
  last_checked_at: z.string(),
});

/** Empty strings, zero and false stand for "nothing yet" so every field is always present. */
export const mailboxStatus = z.object({
  connected: z.boolean(),
  provider: z.enum(['google', 'microsoft']).optional(),
  email_address: z.string(),
  scopes: z.array(z.string()),
  sendable: z.boolean(),
  polling: z.boolean(),
  inbound_cursor_set: z.boolean(),
  connected_at: z.string(),
  healthy_at: z.string(),
  last_polled_at: z.string(),
  sent_today: z.number().int(),
  checks: z.array(check),
});
