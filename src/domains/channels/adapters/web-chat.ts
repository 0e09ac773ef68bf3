import { z } from 'zod';
import { describeType, fail, formatIssues, isRecord, nonBlank, ok } from './common';
import type { ChannelAdapter, InboundMessage, ParseResult } from './types';

/**
 * web_chat: our own widget's format (docs/web-chat-format.md). Unknown fields are ignored so a newer widget
 * can add some without being refused by an older API.
 */
const id = (name: string) =>
  z
    .string({ error: (iss) => (iss.input === undefined ? `${name} is required` : `${name} must be a string`) })
    .trim()
    .min(1, `${name} must not be empty`)
    .max(200, `${name} must be at most 200 characters`);

export const webChatMessage = z.object({
  visitor_id: id('visitor_id'),
  message_id: id('message_id'),
  text: z
    .string({ error: (iss) => (iss.input === undefined ? 'text is required' : 'text must be a string') })
    .max(65536, 'text must be at most 65536 characters')
    .refine((t) => t.trim() !== '', 'text must not be empty'),
  sent_at: z.iso.datetime({ offset: true, error: 'sent_at must be an ISO 8601 date-time (e.g. 2025-01-31T09:30:00Z)' }),
  email: z.union([z.literal(''), z.email({ error: 'email must be an email address' })]).nullish(),
  name: z.string().max(200, 'name must be at most 200 characters').nullish(),
});
export type WebChatMessage = z.input<typeof webChatMessage>;

function parseWebChat(payload: unknown): ParseResult {
  if (!isRecord(payload)) return fail(`web_chat payload must be a JSON object, got ${describeType(payload)}`);
  const parsed = webChatMessage.safeParse(payload);
  if (!parsed.success) return fail(`web_chat payload is invalid: ${formatIssues(parsed.error)}`);
  const p = parsed.data;
  const message: InboundMessage = {
    providerMessageId: p.message_id,
    sender: { handle: p.visitor_id },
    conversationKey: p.visitor_id,
    body: p.text.trim(),
    sentAt: new Date(p.sent_at).toISOString(),
  };
  if (p.email) message.sender.email = p.email.toLowerCase();
  const name = nonBlank(p.name);
  if (name) message.sender.name = name;
  return ok([message]);
}

export const webChatAdapter: ChannelAdapter = { parse: parseWebChat };
