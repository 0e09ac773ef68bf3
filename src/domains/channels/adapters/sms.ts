import { z } from 'zod';
import { describeType, fail, fileRef, formatIssues, isRecord, MAX_ID_LENGTH, mimeType, nameFor, nonBlank, ok, plural } from './common';
import type { ChannelAdapter, InboundFileRef, InboundMessage, ParseResult } from './types';

/**
 * SMS: Twilio Messaging webhook fields, posted by the customer's relay as a JSON object of the form fields
 * (so every value is normally a string; numbers are accepted for NumMedia). Which requests carry a
 * customer message is tabled in docs/decisions/intake.md ("Channel adapters"), from Twilio's webhook reference.
 */
const required = (name: string) =>
  z.string({ error: (iss) => (iss.input === undefined ? `${name} is required` : `${name} must be a string`) }).trim().min(1, `${name} is empty`).max(MAX_ID_LENGTH, `${name} is longer than ${MAX_ID_LENGTH} characters`);

const twilioFields = z.object({
  // Twilio sids are SM/MM + 32 hex; any non-empty string is accepted so a relay's test fixtures still work.
  // SmsSid and SmsMessageSid are deprecated copies of the same value (Twilio's reference): not read.
  MessageSid: required('MessageSid'),
  AccountSid: z.string().nullish(),
  From: required('From'),
  To: required('To'),
  Body: z.string().nullish(),
  NumMedia: z
    .union([z.number(), z.string().trim().regex(/^\d+$/, 'NumMedia must be a whole number').transform(Number)])
    .pipe(z.number().int().min(0).max(100))
    .nullish(),
  ProfileName: z.string().nullish(),
  OptOutType: z.string().nullish(),
  SmsStatus: z.string().nullish(),
  MessageStatus: z.string().nullish(),
});

/**
 * Twilio's status callbacks carry the same sids and numbers as a message, with MessageStatus/SmsStatus
 * `queued`, `sent`, `delivered`…; an incoming message is `received` (or `receiving` while media is fetched).
 */
const INBOUND_STATUSES = new Set(['received', 'receiving']);

/**
 * Keywords Twilio's Advanced Opt-Out handles itself (it answers them and blocks or unblocks the number):
 * the request carries OptOutType STOP, START or HELP. They change consent; they are not a support request.
 */
const OPT_OUT_TYPES = new Set(['STOP', 'START', 'HELP']);

function parseSms(payload: unknown): ParseResult {
  if (!isRecord(payload)) return fail(`sms payload must be a JSON object of the Twilio webhook fields, got ${describeType(payload)}`);
  const parsed = twilioFields.safeParse(payload);
  if (!parsed.success) return fail(`sms payload is not a Twilio message webhook: ${formatIssues(parsed.error)}`);
  const p = parsed.data;

  const status = (nonBlank(p.MessageStatus) ?? nonBlank(p.SmsStatus))?.toLowerCase();
  if (status && !INBOUND_STATUSES.has(status)) return ok([]);
  if (OPT_OUT_TYPES.has(nonBlank(p.OptOutType)?.toUpperCase() ?? '')) return ok([]);

  const count = p.NumMedia ?? 0;
  const files: InboundFileRef[] = [];
  const types = new Set<string>();
  for (let i = 0; i < count; i++) {
    const raw = payload[`MediaUrl${i}`];
    const type = mimeType(payload[`MediaContentType${i}`]);
    if (type) types.add(type);
    // A missing or odd URL is still a file the customer sent: the worker refuses to fetch it and says why
    // (only Twilio's own hosts are ever asked, see src/domains/files/inbound.ts).
    const url = typeof raw === 'string' ? raw.trim().slice(0, 2048) : '';
    files.push(fileRef(nameFor(`media-${i + 1}`, type), { kind: 'twilio', url }, { declaredType: type }));
  }
  const text = nonBlank(p.Body);
  if (!text && count === 0) return fail('sms payload has an empty Body and no media (NumMedia is 0)');

  const parts: string[] = [];
  if (text) parts.push(text);
  // The content types say what was sent (a photo, a PDF); the files themselves are fetched and stored by the
  // worker (issue 34), so the links, which need the account's credentials, are not written into the text.
  if (count > 0) parts.push(`[${plural(count, 'media attachment')}${types.size > 0 ? `: ${[...types].join(', ')}` : ''}]`);

  const message: InboundMessage = {
    providerMessageId: p.MessageSid,
    sender: { handle: p.From },
    conversationKey: `${p.From}|${p.To}`,
    body: parts.join('\n'),
  };
  if (files.length > 0) message.files = files;
  // WhatsApp over Twilio: the sender's WhatsApp profile name.
  const name = nonBlank(p.ProfileName);
  if (name) message.sender.name = name;
  return ok([message]);
}

export const smsAdapter: ChannelAdapter = { parse: parseSms };
