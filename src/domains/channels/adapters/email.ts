import { Tokenizer } from 'htmlparser2';
import { z } from 'zod';
import { byteSize, dateToIso, describeType, fail, fileName, fileRef, formatIssues, isRecord, MAX_ID_LENGTH, mimeType, nonBlank, ok, plural } from './common';
import type { ChannelAdapter, InboundFileRef, InboundMessage, ParseResult } from './types';

/**
 * Email: Postmark-style inbound JSON. Only the fields read below are checked; every one is optional at the
 * shape level (Postmark sends "" or null for absent values) and the rules that matter — a sender address,
 * a message id — are checked after.
 */
const str = z.string().nullish();
const address = z.object({ Email: str, Name: str, MailboxHash: str });

const inboundEmail = z.object({
  From: str,
  FromName: str,
  FromFull: address.nullish(),
  ToFull: z.array(address).nullish(),
  CcFull: z.array(address).nullish(),
  BccFull: z.array(address).nullish(),
  Subject: str,
  Date: str,
  MessageID: str,
  MailboxHash: str,
  TextBody: str,
  HtmlBody: str,
  StrippedTextReply: str,
  // Header entries are read leniently (a malformed one is skipped): a refusal over a header we do not
  // need would lose the email.
  Headers: z.array(z.unknown()).nullish(),
  Attachments: z.array(z.unknown()).nullish(),
});

const ADDRESS = /^[^\s@<>,;"]+@[^\s@<>,;"]+$/;
/** RFC 5321's longest address path; anything longer is not an address (and would not fit a key). */
const MAX_ADDRESS = 254;
/** RFC 5322's longest line, in bytes: a longer "message id" is not one, and is ignored rather than stored as a key. */
const MAX_MESSAGE_ID = 998;
/** Attachment names written into the body; the rest are counted ("and 3 more"). */
const MAX_LISTED_ATTACHMENTS = 20;
/** In-Reply-To and References ids kept for threading: a real thread quotes a few dozen at most. */
const MAX_THREAD_IDS = 100;

/** `ada@x.test`, `Ada <ada@x.test>` → `ada@x.test` (lower-cased); undefined when it is not an address. */
function emailAddress(value: string | null | undefined): string | undefined {
  const v = nonBlank(value);
  if (!v) return undefined;
  const bracketed = /<([^<>]*)>/.exec(v)?.[1]?.trim();
  const candidate = (bracketed ?? v).toLowerCase();
  return candidate.length <= MAX_ADDRESS && ADDRESS.test(candidate) ? candidate : undefined;
}

/**
 * Message ids in a header value, normalised: angle brackets removed, lower-cased. `<a@x> <b@y>` and
 * `a@x b@y` (and comma-separated lists, which some clients write) both give [a@x, b@y].
 */
export function messageIds(value: string | undefined): string[] {
  return messageIdsAsWritten(value).map((id) => id.toLowerCase());
}

/** The same ids with their case kept: matching ignores case, but a reply's headers must quote them exactly. */
export function messageIdsAsWritten(value: string | undefined): string[] {
  if (!value) return [];
  const bracketed = [...value.matchAll(/<([^<>]*)>/g)].map((m) => m[1] ?? '');
  const raw = bracketed.length > 0 ? bracketed : value.split(/[\s,]+/);
  return raw.map((id) => id.trim()).filter((id) => id !== '' && Buffer.byteLength(id) <= MAX_MESSAGE_ID);
}

function headerValues(headers: unknown[] | null | undefined, name: string): string[] {
  const wanted = name.toLowerCase();
  const out: string[] = [];
  for (const h of headers ?? []) {
    if (isRecord(h) && typeof h.Name === 'string' && typeof h.Value === 'string' && h.Name.trim().toLowerCase() === wanted) {
      out.push(h.Value);
    }
  }
  return out;
}

/** Elements whose end starts a new line of text (and `<br>`, which is one). */
const LINE_BREAKING = new Set(['br', 'p', 'div', 'li', 'tr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'pre', 'table']);
/** Elements whose whole content is dropped: code, styling and metadata, never what the sender wrote. */
const DROPPED = new Set(['script', 'style', 'head']);

/**
 * HTML to readable text: blocks become line breaks, tags go, entities are decoded, blank runs collapse.
 * Driven by htmlparser2's Tokenizer, which reads each character once. Its Parser is not used here: the
 * Parser keeps a stack of open elements that costs O(depth) per tag (200,000 nested <div> took 12.6 s),
 * and an email is never refused, so its cost must not depend on how the sender nests tags.
 */
export function htmlToText(html: string): string {
  const parts: string[] = [];
  // Adjacent text sections (a run of stray "<" arrives one character at a time) are cut out as one slice.
  let runStart = 0;
  let runEnd = -1;
  const flush = () => {
    if (runEnd > runStart) parts.push(html.slice(runStart, runEnd));
    runEnd = -1;
  };
  const emit = (text: string) => {
    flush();
    parts.push(text);
  };
  let tag = '';
  // While inside a dropped element: its name, until its end tag (an unclosed one drops the rest).
  let dropping: string | undefined;
  // Only short names matter (the longest we act on is "blockquote"): a long one is never sliced out.
  const name = (start: number, end: number) => (end - start <= 10 ? html.slice(start, end).toLowerCase() : '');
  const tokenizer = new Tokenizer(
    { decodeEntities: true },
    {
      ontext(start, end) {
        if (dropping) return;
        if (start !== runEnd) {
          flush();
          runStart = start;
        }
        runEnd = end;
      },
      ontextentity(codepoint) {
        if (!dropping) emit(String.fromCodePoint(codepoint));
      },
      onopentagname(start, end) {
        tag = name(start, end);
      },
      onopentagend() {
        if (dropping) return;
        if (DROPPED.has(tag)) dropping = tag;
        else if (tag === 'br') emit('\n');
      },
      onselfclosingtag() {
        if (!dropping && tag === 'br') emit('\n');
      },
      onclosetag(start, end) {
        tag = name(start, end);
        if (dropping) {
          if (tag === dropping) dropping = undefined;
          return;
        }
        if (LINE_BREAKING.has(tag)) emit('\n');
      },
      onattribdata() {},
      onattribentity() {},
      onattribend() {},
      onattribname() {},
      oncdata() {},
      oncomment() {},
      ondeclaration() {},
      onend() {},
      onprocessinginstruction() {},
    },
  );
  tokenizer.write(html);
  tokenizer.end();
  flush();
  return parts
    .join('')
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((line) => line.replace(/[ \t\f\v\u00a0]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/**
 * Whether a JSON path is an attachment's base64 `Content` in a Postmark inbound message found under `prefix`
 * (the hook gets the message itself; POST /v1/ingest/email has it under `payload`): the strings a large email's
 * body spools to the file store as it arrives instead of holding them (src/lib/spooled-json.ts).
 */
export function isAttachmentContent(path: readonly (string | number)[], prefix: readonly string[]): boolean {
  const n = prefix.length;
  return path.length === n + 3 && prefix.every((p, i) => path[i] === p) && path[n] === 'Attachments' && typeof path[n + 1] === 'number' && path[n + 2] === 'Content';
}

function attachmentNames(attachments: unknown[] | null | undefined): string[] {
  return (attachments ?? []).map((a) => (isRecord(a) && typeof a.Name === 'string' && a.Name.trim() ? a.Name.trim() : 'unnamed'));
}

/**
 * Every attachment, inline images included, as a file the worker stores: Postmark sends the bytes in the
 * payload (base64 `Content`), so the reference is the entry's position; the edge stages the text before the job
 * is queued. An entry that is not an object is still a file the customer sent: it is listed (and its fetch
 * fails, saying so) rather than dropped.
 */
function attachmentFiles(attachments: unknown[] | null | undefined, names: string[]): InboundFileRef[] {
  return (attachments ?? []).map((a, index) => {
    const cid = isRecord(a) && typeof a.ContentID === 'string' ? nonBlank(a.ContentID.replace(/^\s*<|>\s*$/g, ''))?.slice(0, 998) : undefined;
    return fileRef(fileName(names[index]) ?? 'unnamed', { kind: 'postmark', index }, {
      declaredType: isRecord(a) ? mimeType(a.ContentType) : undefined,
      size: isRecord(a) ? byteSize(a.ContentLength) : undefined,
      contentId: cid,
    });
  });
}

function parseEmail(payload: unknown): ParseResult {
  if (!isRecord(payload)) return fail(`email payload must be a JSON object (Postmark inbound message), got ${describeType(payload)}`);
  const parsed = inboundEmail.safeParse(payload);
  if (!parsed.success) return fail(`email payload is not a valid Postmark inbound message: ${formatIssues(parsed.error)}`);
  const p = parsed.data;

  const from = emailAddress(p.FromFull?.Email) ?? emailAddress(p.From);
  if (!from) return fail('email payload has no sender address (From or FromFull.Email)');

  const rfcWritten = headerValues(p.Headers, 'Message-ID').flatMap(messageIdsAsWritten)[0];
  const rfcId = rfcWritten?.toLowerCase();
  // An over-long service id is ignored like an over-long header id: neither is one, and keys must fit.
  const serviceId = [nonBlank(p.MessageID)].find((id) => id !== undefined && id.length <= MAX_ID_LENGTH);
  const providerMessageId = rfcId ?? serviceId;
  if (!providerMessageId) return fail('email payload has no message id (MessageID or a Message-ID header)');

  const seen = new Set<string>(rfcId ? [rfcId] : []);
  const inReplyTo: string[] = [];
  for (const id of [...headerValues(p.Headers, 'In-Reply-To'), ...headerValues(p.Headers, 'References')].flatMap(messageIds)) {
    if (inReplyTo.length === MAX_THREAD_IDS) break;
    if (!seen.has(id)) {
      seen.add(id);
      inReplyTo.push(id);
    }
  }

  const firstTo = p.ToFull?.[0];
  const plusPart = emailAddress(firstTo?.Email)?.split('@')[0]?.split('+').slice(1).join('+');
  // Postmark sets MailboxHash per recipient too: a reply-all can carry our support+<hash> address in Cc.
  const recipientHash = [...(p.ToFull ?? []), ...(p.CcFull ?? []), ...(p.BccFull ?? [])].map((a) => nonBlank(a.MailboxHash)).find(Boolean);
  const mailboxHash = nonBlank(p.MailboxHash) ?? recipientHash ?? nonBlank(plusPart);

  // StrippedTextReply is Postmark's reply parsing ("the text of a reply, with the quoted history removed"):
  // right for a reply, but for a first message it may hold only part of what the customer wrote, so a
  // message that replies to nothing keeps its whole text.
  const isReply = inReplyTo.length > 0 || mailboxHash !== undefined;
  const fullText = nonBlank(p.TextBody) ?? nonBlank(p.HtmlBody ? htmlToText(p.HtmlBody) : undefined);
  let body = (isReply ? nonBlank(p.StrippedTextReply) : undefined) ?? fullText ?? nonBlank(p.StrippedTextReply);
  const names = attachmentNames(p.Attachments);
  // Attachments are named in the body: the agent must know a file came with the message.
  const listed = names.slice(0, MAX_LISTED_ATTACHMENTS).join(', ') + (names.length > MAX_LISTED_ATTACHMENTS ? ` and ${names.length - MAX_LISTED_ATTACHMENTS} more` : '');
  const attached = names.length > 0 ? `[${plural(names.length, 'attachment')}: ${listed}]` : undefined;
  if (!body) body = attached ?? '[empty message]';
  else if (attached) body = `${body}\n\n${attached}`;

  const message: InboundMessage = {
    providerMessageId,
    sender: { handle: from, email: from },
    body,
  };
  const name = nonBlank(p.FromFull?.Name) ?? nonBlank(p.FromName);
  if (name) message.sender.name = name;
  if (rfcId) message.messageIdHeader = rfcId;
  if (rfcWritten && rfcWritten !== rfcId) message.messageIdAsWritten = rfcWritten;
  if (inReplyTo.length > 0) message.inReplyTo = inReplyTo;
  if (mailboxHash) message.mailboxHash = mailboxHash;
  if (names.length > 0) message.files = attachmentFiles(p.Attachments, names);
  const subject = nonBlank(p.Subject);
  if (subject) message.subject = subject;
  const sentAt = dateToIso(p.Date);
  if (sentAt) message.sentAt = sentAt;
  return ok([message]);
}

export const emailAdapter: ChannelAdapter = { parse: parseEmail };
