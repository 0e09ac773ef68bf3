import { z } from 'zod';
import { dateToIso, describeType, fail, formatIssues, isRecord, nonBlank, ok, plural } from './common';
import type { ChannelAdapter, InboundMessage, ParseResult } from './types';

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

/** `ada@x.test`, `Ada <ada@x.test>` → `ada@x.test` (lower-cased); undefined when it is not an address. */
function emailAddress(value: string | null | undefined): string | undefined {
  const v = nonBlank(value);
  if (!v) return undefined;
  const bracketed = /<([^<>]*)>/.exec(v)?.[1]?.trim();
  const candidate = (bracketed ?? v).toLowerCase();
  return ADDRESS.test(candidate) ? candidate : undefined;
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
  return raw.map((id) => id.trim()).filter((id) => id !== '');
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

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

function decodeEntities(text: string): string {
  return text.replace(/&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,6});/gi, (whole, ref: string) => {
    if (ref[0] === '#') {
      const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return ENTITIES[ref.toLowerCase()] ?? whole;
  });
}

/** Cuts `<tag …>…</tag>` blocks (script, style, head) and comments; linear, so hostile HTML cannot stall it. */
function dropBlocks(html: string): string {
  const lower = html.toLowerCase();
  let out = '';
  let i = 0;
  const openers: Array<[string, string]> = [
    ['<!--', '-->'],
    ['<script', '</script'],
    ['<style', '</style'],
    ['<head', '</head'],
  ];
  while (i < html.length) {
    let next = -1;
    let close = '';
    for (const [open, end] of openers) {
      const at = lower.indexOf(open, i);
      if (at !== -1 && (next === -1 || at < next)) {
        next = at;
        close = end;
      }
    }
    if (next === -1) {
      out += html.slice(i);
      break;
    }
    out += html.slice(i, next);
    const endAt = lower.indexOf(close, next);
    if (endAt === -1) break;
    const gt = close === '-->' ? endAt + 2 : lower.indexOf('>', endAt);
    i = gt === -1 ? html.length : gt + 1;
  }
  return out;
}

/** HTML to readable text: blocks become line breaks, tags go, entities are decoded, blank runs collapse. */
export function htmlToText(html: string): string {
  const text = dropBlocks(html)
    .replace(/<br\s*\/?>/gi, '\n')
    .replace(/<\/(p|div|li|tr|h[1-6]|blockquote|pre|table)\s*>/gi, '\n')
    .replace(/<[^>]*>/g, '');
  return decodeEntities(text)
    .replace(/\r\n?/g, '\n')
    .split('\n')
    .map((line) => line.replace(/[ \t\f\v\u00a0]+/g, ' ').trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function attachmentNames(attachments: unknown[] | null | undefined): string[] {
  return (attachments ?? []).map((a) => (isRecord(a) && typeof a.Name === 'string' && a.Name.trim() ? a.Name.trim() : 'unnamed'));
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
  const serviceId = nonBlank(p.MessageID);
  const providerMessageId = rfcId ?? serviceId;
  if (!providerMessageId) return fail('email payload has no message id (MessageID or a Message-ID header)');

  const seen = new Set<string>(rfcId ? [rfcId] : []);
  const inReplyTo: string[] = [];
  for (const id of [...headerValues(p.Headers, 'In-Reply-To'), ...headerValues(p.Headers, 'References')].flatMap(messageIds)) {
    if (!seen.has(id)) {
      seen.add(id);
      inReplyTo.push(id);
    }
  }

  const firstTo = p.ToFull?.[0];
  const plusPart = emailAddress(firstTo?.Email)?.split('@')[0]?.split('+').slice(1).join('+');
  const mailboxHash = nonBlank(p.MailboxHash) ?? nonBlank(firstTo?.MailboxHash) ?? nonBlank(plusPart);

  let body = nonBlank(p.StrippedTextReply) ?? nonBlank(p.TextBody) ?? nonBlank(p.HtmlBody ? htmlToText(p.HtmlBody) : undefined);
  if (!body) {
    const names = attachmentNames(p.Attachments);
    body = names.length > 0 ? `[${plural(names.length, 'attachment')}: ${names.join(', ')}]` : '[empty message]';
  }

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
  const subject = nonBlank(p.Subject);
  if (subject) message.subject = subject;
  const sentAt = dateToIso(p.Date);
  if (sentAt) message.sentAt = sentAt;
  return ok([message]);
}

export const emailAdapter: ChannelAdapter = { parse: parseEmail };
