import { z } from 'zod';
import { describeType, fail, fileName, fileRef, formatIssues, isRecord, MAX_ID_LENGTH, mimeType, nameFor, nonBlank, ok, plural, unixToIso } from './common';
import type { ChannelAdapter, InboundFileRef, InboundMessage, ParseResult } from './types';

/**
 * WhatsApp Cloud API webhook: `{object: "whatsapp_business_account", entry: [{changes: [{field, value}]}]}`.
 * Only `field: "messages"` changes are read; in them `value.messages[]` are customer messages and
 * `value.statuses[]` are receipts for messages we sent (no inbound message). Other fields (templates,
 * account updates, smb_message_echoes…) are valid payloads with nothing to ingest. Which message types
 * become a ticket message is tabled in docs/decisions/intake.md ("Channel adapters"), from Meta's webhook reference.
 */
const waMessage = z.looseObject({
  // Meta's business-scoped user ids (2026): a user with a username may arrive without `from` (the phone
  // number) and with only `from_user_id` / the contact's `user_id`; the sender is then resolved below.
  from: z.string().trim().min(1).max(MAX_ID_LENGTH).nullish(),
  from_user_id: z.string().trim().min(1).max(MAX_ID_LENGTH).nullish(),
  group_id: z.string().trim().min(1).max(MAX_ID_LENGTH).nullish(),
  id: z.string().trim().min(1).max(MAX_ID_LENGTH),
  timestamp: z.union([z.string(), z.number()]).nullish(),
  type: z.string().nullish(),
});

const messagesValue = z.object({
  metadata: z.object({ phone_number_id: z.string().trim().min(1).max(MAX_ID_LENGTH), display_phone_number: z.string().nullish() }).nullish(),
  contacts: z
    .array(z.object({ wa_id: z.string().nullish(), user_id: z.string().nullish(), profile: z.object({ name: z.string().nullish() }).nullish() }))
    .nullish(),
  messages: z.array(waMessage).nullish(),
  statuses: z.array(z.unknown()).nullish(),
});

const change = z.object({ field: z.string(), value: z.unknown() });
const envelope = z.object({
  entry: z.array(z.object({ id: z.string().nullish(), changes: z.array(change).nullish() })),
});

type WaMessage = z.infer<typeof waMessage>;

const text = (v: unknown): string | undefined => (typeof v === 'string' ? nonBlank(v) : undefined);
const field = (obj: unknown, key: string): unknown => (isRecord(obj) ? obj[key] : undefined);

/**
 * Message types that are not something the customer said to support (Meta's messages webhook reference):
 * `reaction` is an emoji on one of our messages (or its removal, without `emoji`), `system` reports a
 * changed number or user id. They are acknowledged and ignored: a ticket that reads "👍" helps nobody.
 */
const NOT_A_MESSAGE = new Set(['reaction', 'system']);

/** What the agent reads for a non-text message: `[image] caption`, `[document: invoice.pdf]`, `[location] …`. */
function describe(m: WaMessage): string {
  const type = nonBlank(m.type) ?? 'unknown';
  const content = m[type];
  const tag = (detail?: string) => (detail ? `[${type}] ${detail}` : `[${type}]`);
  switch (type) {
    case 'text':
      return text(field(content, 'body')) ?? tag();
    case 'image':
    case 'video':
    case 'audio':
    case 'voice':
    case 'sticker':
      return tag(text(field(content, 'caption')));
    case 'document': {
      const name = text(field(content, 'filename'));
      const caption = text(field(content, 'caption'));
      const head = name ? `[document: ${name}]` : '[document]';
      return caption ? `${head} ${caption}` : head;
    }
    case 'location': {
      const place = [text(field(content, 'name')), text(field(content, 'address'))].filter(Boolean).join(', ');
      const lat = field(content, 'latitude');
      const lng = field(content, 'longitude');
      const coords = typeof lat === 'number' && typeof lng === 'number' ? `(${lat}, ${lng})` : '';
      return tag([place, coords].filter(Boolean).join(' ') || undefined);
    }
    case 'contacts': {
      const names = Array.isArray(content) ? content.map((c) => text(field(field(c, 'name'), 'formatted_name'))).filter(Boolean) : [];
      return tag(names.join(', ') || undefined);
    }
    case 'interactive': {
      const reply = field(content, 'button_reply') ?? field(content, 'list_reply') ?? field(content, 'nfm_reply');
      return tag(text(field(reply, 'title')) ?? text(field(reply, 'body')));
    }
    case 'button':
      return tag(text(field(content, 'text')));
    case 'order': {
      const items = field(content, 'product_items');
      const count = Array.isArray(items) ? items.length : 0;
      const head = count > 0 ? `[order: ${plural(count, 'item')}]` : '[order]';
      const note = text(field(content, 'text'));
      return note ? `${head} ${note}` : head;
    }
    case 'unsupported':
      // Meta could not deliver the content (an unknown type, a view-once message…): the customer did write.
      return '[unsupported message]';
    default:
      return tag();
  }
}

/** Message types whose content is a media object (`{id, mime_type, sha256, …}`) the Graph media endpoint serves. */
const MEDIA_TYPES = new Set(['image', 'document', 'audio', 'video', 'sticker']);

/**
 * The media file a message carries, by its media id (resolved and downloaded by the worker with the
 * connection's token). A media message whose id is missing is still listed: its fetch fails, saying so.
 */
function mediaFile(m: WaMessage): InboundFileRef | undefined {
  const type = nonBlank(m.type) ?? '';
  if (!MEDIA_TYPES.has(type)) return undefined;
  const content = m[type];
  const declaredType = mimeType(field(content, 'mime_type'));
  const id = field(content, 'id');
  const mediaId = typeof id === 'string' ? id.trim().slice(0, MAX_ID_LENGTH) : typeof id === 'number' ? String(id) : '';
  const name = (type === 'document' ? fileName(field(content, 'filename')) : undefined) ?? nameFor(type, declaredType);
  return fileRef(name, { kind: 'whatsapp', mediaId }, { declaredType });
}

function parseWhatsapp(payload: unknown): ParseResult {
  if (!isRecord(payload)) return fail(`whatsapp payload must be a JSON object (Cloud API webhook), got ${describeType(payload)}`);
  if (payload.object !== 'whatsapp_business_account') {
    const got = typeof payload.object === 'string' ? `"${payload.object}"` : 'missing';
    return fail(`whatsapp payload is not a WhatsApp Cloud API webhook: object must be "whatsapp_business_account" (${got})`);
  }
  const env = envelope.safeParse(payload);
  if (!env.success) return fail(`whatsapp payload is not a valid Cloud API webhook: ${formatIssues(env.error)}`);

  const out: InboundMessage[] = [];
  const seen = new Set<string>();
  for (const [e, entry] of env.data.entry.entries()) {
    for (const [c, ch] of (entry.changes ?? []).entries()) {
      if (ch.field !== 'messages') continue;
      const parsed = messagesValue.safeParse(ch.value);
      if (!parsed.success) {
        const prefix = `entry.${e}.changes.${c}.value`;
        return fail(`whatsapp payload has an invalid messages change at ${prefix}: ${formatIssues(parsed.error)}`);
      }
      const value = parsed.data;
      const messages = value.messages ?? [];
      if (messages.length === 0) continue; // statuses (receipts) or errors only
      const phoneNumberId = value.metadata?.phone_number_id;
      if (!phoneNumberId) return fail(`whatsapp payload has messages without metadata.phone_number_id (entry.${e}.changes.${c})`);
      const contacts = value.contacts ?? [];
      for (const [i, m] of messages.entries()) {
        if (seen.has(m.id)) continue;
        seen.add(m.id);
        if (NOT_A_MESSAGE.has(nonBlank(m.type) ?? '')) continue;
        // The contact that sent it: by phone (wa_id) or by business-scoped id; a one-contact change is its sender.
        const contact =
          contacts.find((k) => (m.from && k.wa_id === m.from) || (m.from_user_id && k.user_id === m.from_user_id)) ??
          (contacts.length === 1 ? contacts[0] : undefined);
        const handle = m.from ?? m.from_user_id ?? nonBlank(contact?.wa_id) ?? nonBlank(contact?.user_id);
        if (!handle || handle.length > MAX_ID_LENGTH) {
          return fail(`whatsapp payload has a message without a sender (from, from_user_id or contacts) at entry.${e}.changes.${c}.value.messages.${i}`);
        }
        const message: InboundMessage = {
          providerMessageId: m.id,
          sender: { handle },
          // A group message belongs to the group's conversation, not to the member's one-to-one chat.
          conversationKey: m.group_id ? `${phoneNumberId}|group:${m.group_id}` : `${phoneNumberId}|${handle}`,
          body: describe(m),
        };
        const name = nonBlank(contact?.profile?.name);
        if (name) message.sender.name = name;
        const file = mediaFile(m);
        if (file) message.files = [file];
        const sentAt = unixToIso(m.timestamp);
        if (sentAt) message.sentAt = sentAt;
        out.push(message);
      }
    }
  }
  return ok(out);
}

export const whatsappAdapter: ChannelAdapter = { parse: parseWhatsapp };
