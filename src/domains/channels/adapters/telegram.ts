import { z } from 'zod';
import { byteSize, describeType, fail, fileName, fileRef, formatIssues, isRecord, mimeType, nameFor, nonBlank, ok, unixToIso } from './common';
import type { ChannelAdapter, InboundFileRef, InboundMessage, ParseResult } from './types';

/**
 * Telegram Bot API Update. Only `message` carries a new customer message; `edited_message`, `channel_post`,
 * `callback_query`, `my_chat_member` and the other update kinds are valid payloads with nothing to ingest
 * (the table, with sources, is in docs/decisions/intake.md "Channel adapters").
 */
const user = z.object({
  id: z.number().int(),
  first_name: z.string().nullish(),
  last_name: z.string().nullish(),
  username: z.string().nullish(),
});
const chat = z.object({ id: z.number().int(), type: z.string().nullish(), title: z.string().nullish() });

const message = z.looseObject({
  message_id: z.number().int(),
  from: user.nullish(),
  sender_chat: chat.nullish(),
  chat,
  date: z.number().nullish(),
  text: z.string().nullish(),
  caption: z.string().nullish(),
});

const update = z.object({
  update_id: z.number({ error: (iss) => (iss.input === undefined ? 'update_id is required' : 'update_id must be a number') }).int(),
  message: message.nullish(),
});

/** Media kinds, in the order they are tested (an animation also carries `document`, a venue `location`). */
const MEDIA_KINDS = [
  'photo',
  'video',
  'animation',
  'audio',
  'voice',
  'video_note',
  'document',
  'sticker',
  'venue',
  'location',
  'contact',
  'poll',
  'dice',
  'game',
  'story',
  'invoice',
] as const;

/** Service messages (someone joined, a pin, a title change…): not something a customer said. */
const SERVICE_KEYS = [
  'new_chat_members',
  'left_chat_member',
  'new_chat_title',
  'new_chat_photo',
  'delete_chat_photo',
  'group_chat_created',
  'supergroup_chat_created',
  'channel_chat_created',
  'message_auto_delete_timer_changed',
  'migrate_to_chat_id',
  'migrate_from_chat_id',
  'pinned_message',
  'successful_payment',
  'users_shared',
  'chat_shared',
  'write_access_allowed',
  'forum_topic_created',
  'forum_topic_edited',
  'forum_topic_closed',
  'forum_topic_reopened',
  'video_chat_scheduled',
  'video_chat_started',
  'video_chat_ended',
  'video_chat_participants_invited',
] as const;

type TgMessage = z.infer<typeof message>;

const str = (obj: unknown, key: string): string | undefined => {
  const v = isRecord(obj) ? obj[key] : undefined;
  return typeof v === 'string' ? nonBlank(v) : undefined;
};

/** The name Telegram gives a media item, where it has one: a document's file name, an audio's title. */
function mediaDetail(kind: (typeof MEDIA_KINDS)[number], item: unknown): string | undefined {
  switch (kind) {
    case 'document':
    case 'video':
    case 'animation':
      return str(item, 'file_name');
    case 'audio':
      return str(item, 'title') ?? str(item, 'file_name');
    case 'venue':
      return str(item, 'title');
    case 'contact':
      return [str(item, 'first_name'), str(item, 'last_name')].filter(Boolean).join(' ') || undefined;
    case 'poll':
      return str(item, 'question');
    default:
      return undefined;
  }
}

/**
 * Text as written; media as `[photo] caption`, `[document: Testfile.pdf]`: the marker says something is
 * attached (a caption alone hid the photo from the agent), the caption is what the customer said about it.
 */
function body(m: TgMessage): string | undefined {
  const t = nonBlank(m.text);
  if (t) return t;
  const caption = nonBlank(m.caption);
  const kind = MEDIA_KINDS.find((k) => m[k] !== undefined && m[k] !== null);
  if (kind) {
    const detail = mediaDetail(kind, m[kind]);
    const head = detail ? `[${kind}: ${detail}]` : `[${kind}]`;
    return caption ? `${head} ${caption}` : head;
  }
  if (caption) return caption;
  if (SERVICE_KEYS.some((k) => m[k] !== undefined && m[k] !== null)) return undefined;
  return '[unsupported message]';
}

/** Media kinds that are a file the Bot API serves through getFile, with the type each has when none is declared. */
const FILE_KINDS: Partial<Record<(typeof MEDIA_KINDS)[number], string | undefined>> = {
  photo: 'image/jpeg',
  video: 'video/mp4',
  animation: 'video/mp4',
  audio: 'audio/mpeg',
  voice: 'audio/ogg',
  video_note: 'video/mp4',
  document: undefined,
  sticker: 'image/webp',
};

const num = (obj: unknown, key: string): number => {
  const v = isRecord(obj) ? obj[key] : undefined;
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
};

/**
 * The file a message carries (a Telegram message has at most one): a photo arrives in several sizes, the largest
 * is kept (by file_size, else by pixels). An item without a file_id is still listed: its fetch fails, saying so.
 */
function messageFile(m: TgMessage): InboundFileRef | undefined {
  const kind = MEDIA_KINDS.find((k) => m[k] !== undefined && m[k] !== null);
  if (!kind || !(kind in FILE_KINDS)) return undefined;
  let item: unknown = m[kind];
  if (kind === 'photo') {
    const sizes = Array.isArray(item) ? item.filter(isRecord) : [];
    item = sizes.reduce<unknown>((best, s) => {
      if (best === undefined) return s;
      const [a, b] = [num(s, 'file_size'), num(best, 'file_size')];
      return a > b || (a === b && num(s, 'width') * num(s, 'height') > num(best, 'width') * num(best, 'height')) ? s : best;
    }, undefined);
  }
  const fileId = str(item, 'file_id')?.slice(0, 1024) ?? '';
  let declaredType = mimeType(isRecord(item) ? item.mime_type : undefined) ?? FILE_KINDS[kind];
  if (kind === 'sticker' && isRecord(item)) declaredType = item.is_animated === true ? 'application/x-tgsticker' : item.is_video === true ? 'video/webm' : declaredType;
  const name = fileName(isRecord(item) ? item.file_name : undefined) ?? nameFor(kind, declaredType);
  return fileRef(name, { kind: 'telegram', fileId }, { declaredType, size: byteSize(isRecord(item) ? item.file_size : undefined) });
}

function senderName(m: TgMessage): string | undefined {
  if (m.from) {
    const full = [nonBlank(m.from.first_name), nonBlank(m.from.last_name)].filter(Boolean).join(' ');
    return full || nonBlank(m.from.username);
  }
  return nonBlank(m.sender_chat?.title);
}

function parseTelegram(payload: unknown): ParseResult {
  if (!isRecord(payload)) return fail(`telegram payload must be a JSON object (Bot API Update), got ${describeType(payload)}`);
  const parsed = update.safeParse(payload);
  if (!parsed.success) return fail(`telegram payload is not a Bot API Update: ${formatIssues(parsed.error)}`);
  const m = parsed.data.message;
  if (!m) return ok([]); // edited_message, channel_post, callback_query…: not a new customer message

  const text = body(m);
  if (text === undefined) return ok([]);
  // Anonymous group admins and channel-linked posts have no `from`: the sending chat stands in.
  const handle = String(m.from?.id ?? m.sender_chat?.id ?? m.chat.id);
  const msg: InboundMessage = {
    // message_id is unique per chat: the pair names the message itself (stable across redelivery, and the
    // same pair a later reply_to_message points at), where update_id names one delivery envelope.
    providerMessageId: `${m.chat.id}:${m.message_id}`,
    sender: { handle },
    conversationKey: String(m.chat.id),
    body: text,
  };
  const name = senderName(m);
  if (name) msg.sender.name = name;
  const file = messageFile(m);
  if (file) msg.files = [file];
  const sentAt = unixToIso(m.date);
  if (sentAt) msg.sentAt = sentAt;
  return ok([msg]);
}

export const telegramAdapter: ChannelAdapter = { parse: parseTelegram };
