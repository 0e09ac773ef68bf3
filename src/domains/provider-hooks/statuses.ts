import { z } from 'zod';
import { dateToIso, describeType, formatIssues, isRecord, MAX_ID_LENGTH, nonBlank, unixToIso } from '../channels/adapters/common';

/**
 * Delivery receipts for messages we sent, from the providers' native hooks, in one shape: which provider
 * message moved to which delivery state (DESIGN.md §7: queued → sent → delivered/read, or failed). Pure: no
 * I/O, nothing here throws on any input, and unknown fields are ignored. Provider facts: shared/providers.md,
 * "Sending replies and native provider hooks".
 *
 * Telegram has nothing here: the Bot API sends no delivery or read receipts for a bot's messages (an Update
 * is something a user or chat did). A Telegram reply is `sent` once sendMessage answers `ok: true`, and stays so.
 */

export type DeliveryState = 'sent' | 'delivered' | 'read' | 'failed';

export interface DeliveryUpdate {
  /** The provider's id of the message we sent: a Twilio `SM…` sid, a WhatsApp `wamid.…`, a Postmark MessageID. */
  providerMessageId: string;
  state: DeliveryState;
  /** The provider's error code, as text (Twilio `30003`, Meta `131047`, Postmark `HardBounce`). */
  errorCode?: string;
  /** What the provider said went wrong, for the agent; at most MAX_ERROR_TEXT characters. */
  errorText?: string;
  /** When the provider says the state was reached, ISO 8601; absent when the callback does not say. */
  at?: string;
}

export type StatusesResult = { ok: true; updates: DeliveryUpdate[] } | { ok: false; reason: string };

/** Most statuses one WhatsApp POST may carry. Meta batches a handful; a thousand is far past any real batch. */
export const MAX_WHATSAPP_STATUSES = 1000;
/** Entries and changes are walked to reach the statuses: bounded the same way, so the walk is. */
const MAX_WHATSAPP_CONTAINERS = 1000;
/** Error codes are short (`131047`, `30008`, `HardBounce`); a longer one is cut, not stored whole. */
const MAX_ERROR_CODE = 64;
/** Error texts are a sentence or an SMTP reply line; they are shown to agents, not kept verbatim at any size. */
export const MAX_ERROR_TEXT = 1000;
/** Meta sends one error per failed status; the first few are enough to find one that reads. */
const MAX_ERRORS_READ = 10;

// ------------------------------------------------------------------------------------------ helpers

const cut = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** An error code as bounded text: a string trimmed, or an integer written out. */
function codeText(value: unknown): string | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) ? String(value) : undefined;
  const text = typeof value === 'string' ? nonBlank(value) : undefined;
  return text === undefined ? undefined : cut(text, MAX_ERROR_CODE);
}

/** The non-blank parts, each once, joined: providers often repeat one sentence in two fields. */
function errorTextOf(...parts: unknown[]): string | undefined {
  const seen: string[] = [];
  for (const part of parts) {
    const text = typeof part === 'string' ? nonBlank(part) : undefined;
    if (text !== undefined && !seen.includes(text)) seen.push(text);
  }
  return seen.length === 0 ? undefined : cut(seen.join(' — '), MAX_ERROR_TEXT);
}

function update(providerMessageId: string, state: DeliveryState, extra: { errorCode?: string | undefined; errorText?: string | undefined; at?: string | undefined }): DeliveryUpdate {
  const out: DeliveryUpdate = { providerMessageId, state };
  if (extra.errorCode !== undefined) out.errorCode = extra.errorCode;
  if (extra.errorText !== undefined) out.errorText = extra.errorText;
  if (extra.at !== undefined) out.at = extra.at;
  return out;
}

const providerId = z.string().trim().min(1).max(MAX_ID_LENGTH);

// ------------------------------------------------------------------------------------------- Twilio

/**
 * Twilio's MessageStatus values (Message resource, "Message Status values") and the move each makes. A Map,
 * not an object literal: a status of `constructor` must find nothing. `null`: a real status that moves
 * nothing — queued/sending/accepted/scheduled are before `sent`, which our own send already recorded from
 * Twilio's answer. `canceled` only ends a scheduled message that never went out, so it is a failure. Statuses
 * not listed (`received`/`receiving` are inbound messages; `partially_delivered`; anything new) → no update.
 */
const TWILIO_STATES: ReadonlyMap<string, DeliveryState | null> = new Map<string, DeliveryState | null>([
  ['queued', null],
  ['sending', null],
  ['accepted', null],
  ['scheduled', null],
  ['sent', 'sent'],
  ['delivered', 'delivered'],
  ['read', 'read'],
  ['undelivered', 'failed'],
  ['failed', 'failed'],
  ['canceled', 'failed'],
]);

/** The fields a status callback carries that we read. A repeated field (a list) fails the shape: not Twilio's. */
const twilioStatusFields = z.object({
  MessageSid: providerId,
  MessageStatus: z.string().optional(),
  // Deprecated copy of MessageStatus that Twilio still sends; read when MessageStatus is absent.
  SmsStatus: z.string().optional(),
  ErrorCode: z.string().optional(),
  ErrorMessage: z.string().optional(),
});

/**
 * A Twilio status callback (form fields, see parseForm) as a delivery update: `MessageSid` and
 * `MessageStatus` (or `SmsStatus`) sent/delivered/read/undelivered/failed, with `ErrorCode` (and
 * `ErrorMessage` when Twilio adds it). Null for everything else: an inbound message (status `received`), a
 * status before `sent`, a form without a MessageSid. Status callbacks carry no timestamp, so `at` is absent:
 * the caller knows when it heard.
 */
export function twilioStatus(fields: Record<string, string | string[]>): DeliveryUpdate | null {
  if (typeof fields !== 'object' || fields === null) return null;
  const parsed = twilioStatusFields.safeParse(fields);
  if (!parsed.success) return null;
  const f = parsed.data;
  const status = (nonBlank(f.MessageStatus) ?? nonBlank(f.SmsStatus))?.toLowerCase();
  if (status === undefined) return null;
  const state = TWILIO_STATES.get(status);
  if (state === undefined || state === null) return null;
  return update(f.MessageSid, state, {
    errorCode: codeText(f.ErrorCode),
    errorText: errorTextOf(f.ErrorMessage),
  });
}

// ----------------------------------------------------------------------------------------- WhatsApp

/** Meta's status values that move a message; others (`deleted`, `warning`, `played` for voice…) are skipped. */
const WHATSAPP_STATES: ReadonlyMap<string, DeliveryState> = new Map<string, DeliveryState>([
  ['sent', 'sent'],
  ['delivered', 'delivered'],
  ['read', 'read'],
  ['failed', 'failed'],
]);

const waEnvelope = z.object({
  object: z.literal('whatsapp_business_account', { error: 'object must be "whatsapp_business_account"' }),
  entry: z.array(z.unknown()).max(MAX_WHATSAPP_CONTAINERS, `more than ${MAX_WHATSAPP_CONTAINERS} entries`),
});
const waEntry = z.object({ changes: z.array(z.unknown()).nullish() });
const waChange = z.object({ field: z.string().nullish(), value: z.unknown() });
const waValue = z.object({ statuses: z.array(z.unknown()).nullish() });
const waStatus = z.object({
  id: providerId,
  status: z.string(),
  // Unix seconds, a string in Meta's examples; a number is accepted too.
  timestamp: z.union([z.string(), z.number()]).nullish(),
  errors: z.array(z.unknown()).nullish(),
});
const waError = z.object({
  code: z.union([z.number(), z.string()]).nullish(),
  title: z.string().nullish(),
  message: z.string().nullish(),
  // `{details}` on message errors; Meta documents a plain string for some template errors, so unknown here.
  error_data: z.unknown().optional(),
});

/** The first readable error of a status: code and text. An unreadable one must not cost us the failed state. */
function whatsappError(errors: unknown[] | null | undefined): { errorCode?: string | undefined; errorText?: string | undefined } {
  for (const raw of (errors ?? []).slice(0, MAX_ERRORS_READ)) {
    const parsed = waError.safeParse(raw);
    if (!parsed.success) continue;
    const e = parsed.data;
    const details = isRecord(e.error_data) ? e.error_data.details : e.error_data;
    const errorCode = codeText(e.code);
    const errorText = errorTextOf(e.title, e.message, details);
    if (errorCode !== undefined || errorText !== undefined) return { errorCode, errorText };
  }
  return {};
}

/**
 * Every delivery receipt in a WhatsApp Cloud API webhook: `entry[].changes[].value.statuses[]` of the
 * `messages` field, each `{id, status, timestamp, errors?}` (Meta's "Status messages webhook reference").
 * sent/delivered/read/failed become updates, in the order sent (a batch may hold several for one message);
 * other statuses are skipped. `at` is the status timestamp (Unix seconds). A failed status's first error
 * gives `errorCode` (`code`) and `errorText` (`title`, `message`, `error_data.details`, repeats dropped).
 * Inbound messages in the same POST are left to the channel adapter. Refused: a body that is not a Cloud API
 * webhook, a status without an id, more than MAX_WHATSAPP_STATUSES statuses (or entries, or changes).
 */
export function whatsappStatuses(body: unknown): StatusesResult {
  if (!isRecord(body)) return { ok: false, reason: `whatsapp webhook must be a JSON object, got ${describeType(body)}` };
  const envelope = waEnvelope.safeParse(body);
  if (!envelope.success) return { ok: false, reason: `not a WhatsApp Cloud API webhook: ${formatIssues(envelope.error)}` };

  const updates: DeliveryUpdate[] = [];
  let changesSeen = 0;
  let statusesSeen = 0;
  for (const [e, rawEntry] of envelope.data.entry.entries()) {
    const entry = waEntry.safeParse(rawEntry);
    if (!entry.success) return { ok: false, reason: `invalid webhook entry at entry.${e}: ${formatIssues(entry.error)}` };
    const changes = entry.data.changes ?? [];
    changesSeen += changes.length;
    if (changesSeen > MAX_WHATSAPP_CONTAINERS) return { ok: false, reason: `whatsapp webhook has more than ${MAX_WHATSAPP_CONTAINERS} changes` };
    for (const [c, rawChange] of changes.entries()) {
      const change = waChange.safeParse(rawChange);
      if (!change.success) return { ok: false, reason: `invalid change at entry.${e}.changes.${c}: ${formatIssues(change.error)}` };
      // Statuses only ride `messages` changes; other fields (templates, account updates…) carry none.
      if (change.data.field !== 'messages') continue;
      const value = waValue.safeParse(change.data.value);
      if (!value.success) return { ok: false, reason: `invalid messages change at entry.${e}.changes.${c}.value: ${formatIssues(value.error)}` };
      const statuses = value.data.statuses ?? [];
      statusesSeen += statuses.length;
      if (statusesSeen > MAX_WHATSAPP_STATUSES) return { ok: false, reason: `whatsapp webhook has more than ${MAX_WHATSAPP_STATUSES} statuses` };
      for (const [s, rawStatus] of statuses.entries()) {
        const status = waStatus.safeParse(rawStatus);
        if (!status.success) {
          return { ok: false, reason: `invalid status at entry.${e}.changes.${c}.value.statuses.${s}: ${formatIssues(status.error)}` };
        }
        const st = status.data;
        const state = WHATSAPP_STATES.get(st.status.trim().toLowerCase());
        if (state === undefined) continue;
        const error = state === 'failed' ? whatsappError(st.errors) : {};
        updates.push(update(st.id, state, { ...error, at: unixToIso(st.timestamp) }));
      }
    }
  }
  return { ok: true, updates };
}

// ----------------------------------------------------------------------------------------- Postmark

/**
 * Bounce types (Postmark's bounce API, "Bounce types") that are not a failure to deliver the message they
 * name: an out-of-office or other auto-reply (AutoResponder) proves it arrived; (un)subscribe requests, an
 * address-change notice and an open-relay test are mail about the recipient, not a bounce of ours; an
 * InboundError concerns mail sent to us. Every other type — HardBounce, SoftBounce, Transient, DnsError,
 * Blocked, BadEmailAddress, ManuallyDeactivated, SpamNotification, Unknown, types added later — is failed.
 * Matched on `Type`, not `TypeCode`: Postmark's own examples give one type two codes (SpamComplaint: 512
 * and 100001).
 */
const NOT_A_FAILURE: ReadonlySet<string> = new Set(['AutoResponder', 'Subscribe', 'Unsubscribe', 'AddressChange', 'OpenRelayTest', 'InboundError']);

const postmarkRecordShape = z.object({
  RecordType: z.string(),
  MessageID: providerId,
  DeliveredAt: z.string().nullish(),
  BouncedAt: z.string().nullish(),
  Type: z.string().nullish(),
  TypeCode: z.union([z.number(), z.string()]).nullish(),
  Description: z.string().nullish(),
  Details: z.string().nullish(),
});

/**
 * A Postmark webhook record as a delivery update, by `RecordType`:
 * - `Delivery` → delivered at `DeliveredAt`;
 * - `Bounce` → failed at `BouncedAt`, `Type` (else `TypeCode`) as the code and `Description` + `Details`
 *   (the receiving server's reply) as the text — except the bounce types in NOT_A_FAILURE → null;
 * - `SpamComplaint` → failed: the recipient reported the message, and Postmark deactivates the address, so
 *   later replies to it will not be sent either — the agent has to know;
 * - `Open`, `Click`, `SubscriptionChange`, anything else → null.
 * An inbound email (no `RecordType`: it has `From`, `MessageID`…) → null, for the email adapter; so is a
 * record without a usable MessageID.
 */
export function postmarkRecord(body: unknown): DeliveryUpdate | null {
  if (!isRecord(body) || typeof body.RecordType !== 'string') return null;
  const parsed = postmarkRecordShape.safeParse(body);
  if (!parsed.success) return null;
  const r = parsed.data;
  switch (r.RecordType) {
    case 'Delivery':
      return update(r.MessageID, 'delivered', { at: dateToIso(r.DeliveredAt) });
    case 'Bounce':
    case 'SpamComplaint': {
      const type = nonBlank(r.Type);
      if (r.RecordType === 'Bounce' && type !== undefined && NOT_A_FAILURE.has(type)) return null;
      return update(r.MessageID, 'failed', {
        errorCode: codeText(type) ?? codeText(r.TypeCode) ?? (r.RecordType === 'SpamComplaint' ? 'SpamComplaint' : undefined),
        errorText: errorTextOf(r.Description, r.Details),
        at: dateToIso(r.BouncedAt),
      });
    }
    default:
      return null;
  }
}
