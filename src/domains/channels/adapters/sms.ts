import { z } from 'zod';
import { describeType, fail, formatIssues, isRecord, MAX_ID_LENGTH, nonBlank, ok, plural } from './common';
import type { ChannelAdapter, InboundMessage, ParseResult } from './types';

/**
 * SMS: Twilio Messaging webhook fields, posted by the customer's relay as a JSON object of the form fields
 * (so every value is normally a string; numbers are accepted for NumMedia).
 */
const required = (name: string) =>
  z.string({ error: (iss) => (iss.input === undefined ? `${name} is required` : `${name} must be a string`) }).trim().min(1, `${name} is empty`).max(MAX_ID_LENGTH, `${name} is longer than ${MAX_ID_LENGTH} characters`);

const twilioFields = z.object({
  // Twilio sids are SM/MM + 32 hex; any non-empty string is accepted so a relay's test fixtures still work.
  MessageSid: required('MessageSid'),
  AccountSid: z.string().nullish(),
  From: required('From'),
  To: required('To'),
  Body: z.string().nullish(),
  NumMedia: z
    .union([z.number(), z.string().trim().regex(/^\d+$/, 'NumMedia must be a whole number').transform(Number)])
    .pipe(z.number().int().min(0).max(100))
    .nullish(),
});

function parseSms(payload: unknown): ParseResult {
  if (!isRecord(payload)) return fail(`sms payload must be a JSON object of the Twilio webhook fields, got ${describeType(payload)}`);
  const parsed = twilioFields.safeParse(payload);
  if (!parsed.success) return fail(`sms payload is not a Twilio message webhook: ${formatIssues(parsed.error)}`);
  const p = parsed.data;

  const count = p.NumMedia ?? 0;
  const urls: string[] = [];
  for (let i = 0; i < count; i++) {
    const url = payload[`MediaUrl${i}`];
    if (typeof url === 'string' && url.trim() !== '') urls.push(url.trim());
  }
  const text = nonBlank(p.Body);
  if (!text && count === 0) return fail('sms payload has an empty Body and no media (NumMedia is 0)');

  const parts: string[] = [];
  if (text) parts.push(text);
  if (count > 0) parts.push(`[${plural(count, 'media attachment')}]`, ...urls);

  const message: InboundMessage = {
    providerMessageId: p.MessageSid,
    sender: { handle: p.From },
    conversationKey: `${p.From}|${p.To}`,
    body: parts.join('\n'),
  };
  return ok([message]);
}

export const smsAdapter: ChannelAdapter = { parse: parseSms };
