import { z } from 'zod';
import { describeType, fail, formatIssues, isRecord, nonBlank, ok } from './common';
import type { ChannelAdapter, InboundMessage, ParseResult } from './types';

/**
 * Visitor ids the service mints for web chat sessions (issue 33) begin with this, and so do the ledger ids of
 * their messages. Intake by payload refuses both, so a page holding the (public) inbound token cannot post into
 * a session visitor's conversation, nor take a message id a visitor will send: only the visitor's own session
 * writes there.
 */
export const SESSION_VISITOR_PREFIX = 'wv_';

/**
 * web_chat: our own widget's format (docs/web-chat-format.md). Unknown fields are ignored so a newer widget
 * can add some without being refused by an older API.
 */
const id = (name: string) =>
  z
    .string({ error: (iss) => (iss.input === undefined ? `${name} is required` : `${name} must be a string`) })
    .trim()
    .min(1, `${name} must not be empty`)
    .max(200, `${name} must be at most 200 characters`)
    .refine((v) => !v.startsWith(SESSION_VISITOR_PREFIX), `${name} must not begin with ${SESSION_VISITOR_PREFIX} (reserved for web chat sessions: POST /v1/web-chat/messages)`);

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

/**
 * A message a visitor posts through their session (POST /v1/web-chat/messages): the visitor id comes from the
 * session's token, never from the body, and the widget's message id is kept per visitor (two visitors may both
 * send `m1`), so its ledger id is `<visitor id>:<message id>`. `text` is checked by the route (not blank, at
 * most 65 536 characters).
 */
export function sessionMessage(visitorId: string, messageId: string, text: string, sentAt: Date): InboundMessage {
  return {
    providerMessageId: `${visitorId}:${messageId}`,
    sender: { handle: visitorId },
    conversationKey: visitorId,
    body: text.trim(),
    sentAt: sentAt.toISOString(),
  };
}

/** The widget's own message id of a session message, from its ledger id; undefined for another visitor's. */
export const sessionMessageId = (visitorId: string, providerMessageId: string | null | undefined): string | undefined =>
  providerMessageId?.startsWith(`${visitorId}:`) ? providerMessageId.slice(visitorId.length + 1) : undefined;
