import { jsonOf, providerRequest, retryAfterMs } from '../http';
import { multipartBody, WHATSAPP_IMAGE_TYPES, type OutgoingFile } from '../attachments';
import { NoAnswer, NotReached, type ProviderAnswer } from '../http';
import { byStatus, transportFailure, type OutgoingReply, type SendResult, type SenderSettings } from '../types';

/**
 * Meta's throughput and rate limit codes (Cloud API error codes): 130429 rate limit hit, 131056 pair rate
 * limit, 80007 WABA rate limit, 4 application request limit. They are "try later", whatever the HTTP status.
 */
const RATE_LIMITED = new Set(['130429', '131056', '80007', '4']);

/**
 * WhatsApp Cloud API: POST /{version}/{phone_number_id}/messages with the system user's bearer token,
 * `{messaging_product: "whatsapp", to, type: "text", text: {body}}` or a template message. The answer names
 * the message `wamid…`, which the `statuses` webhooks name too. Errors are
 * `{error: {message, type, code, error_data: {details}, fbtrace_id}}`; 131047 is re-engagement (the 24-hour
 * window is closed: only a template may be sent), 190 an invalid token.
 */
export async function sendWhatsapp(
  s: SenderSettings,
  creds: { api_key: string; phone_number_id?: string },
  r: OutgoingReply & { media?: { type: 'image' | 'document'; id: string; caption?: string; filename?: string } },
): Promise<SendResult> {
  const phoneNumberId = r.phoneNumberId ?? creds.phone_number_id ?? '';
  const message = r.media
    ? {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: r.to,
        type: r.media.type,
        [r.media.type]: { id: r.media.id, ...(r.media.caption ? { caption: r.media.caption } : {}), ...(r.media.type === 'document' && r.media.filename ? { filename: r.media.filename } : {}) },
      }
    : r.template
    ? {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: r.to,
        type: 'template',
        template: { name: r.template.name, language: { code: r.template.language }, ...(r.template.components ? { components: r.template.components } : {}) },
      }
    : { messaging_product: 'whatsapp', recipient_type: 'individual', to: r.to, type: 'text', text: { preview_url: false, body: r.text } };
  let answer;
  try {
    answer = await providerRequest(`${s.WHATSAPP_API_URL.replace(/\/$/, '')}/${s.WHATSAPP_API_VERSION}/${encodeURIComponent(phoneNumberId)}/messages`, {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json', authorization: `Bearer ${creds.api_key}` },
      body: JSON.stringify(message),
      timeoutMs: s.OUTBOUND_SEND_TIMEOUT_MS,
    });
  } catch (err) {
    return transportFailure(err, 'WhatsApp');
  }
  return whatsappAnswer(answer, 'WhatsApp refused the message');
}

/** Meta's answer as a send result (a message id in `messages[0].id`, or in `id` for a media upload). */
function whatsappAnswer(answer: ProviderAnswer, refused: string): SendResult {
  const body = jsonOf(answer.text);
  if (answer.status >= 200 && answer.status < 300 && typeof body.id === 'string' && !Array.isArray(body.messages)) return { outcome: 'sent', providerMessageId: body.id };
  const messages = Array.isArray(body.messages) ? (body.messages as { id?: unknown }[]) : [];
  if (answer.status >= 200 && answer.status < 300 && typeof messages[0]?.id === 'string') return { outcome: 'sent', providerMessageId: messages[0].id };
  const error = (body.error ?? {}) as { message?: unknown; code?: unknown; error_data?: { details?: unknown } };
  const code = error.code !== undefined ? String(error.code) : undefined;
  const details = typeof error.error_data?.details === 'string' ? ` (${error.error_data.details})` : '';
  const text = `${refused}: ${typeof error.message === 'string' ? error.message : `HTTP ${answer.status}`}${details}`;
  if (code && RATE_LIMITED.has(code)) return { outcome: 'retry', reason: text, code, ...(retryAfterMs(answer.headers['retry-after']) !== undefined ? { retryAfterMs: retryAfterMs(answer.headers['retry-after'])! } : {}) };
  return byStatus(answer, text, code, retryAfterMs(answer.headers['retry-after']));
}

/**
 * A stored file uploaded to WhatsApp: POST /{version}/{phone_number_id}/media, multipart/form-data with
 * `messaging_product=whatsapp`, `type` and the file (streamed from the store). Answers `{id}`, the media id a
 * message then names. An upload is not a message: the customer sees nothing of it, so one that got no answer is
 * retried like one that never left (the media Meta may hold unused expires on its own after 30 days).
 */
export async function uploadWhatsappMedia(s: SenderSettings, creds: { api_key: string }, phoneNumberId: string, file: OutgoingFile): Promise<SendResult> {
  let answer;
  try {
    answer = await providerRequest(`${s.WHATSAPP_API_URL.replace(/\/$/, '')}/${s.WHATSAPP_API_VERSION}/${encodeURIComponent(phoneNumberId)}/media`, {
      method: 'POST',
      headers: { accept: 'application/json', authorization: `Bearer ${creds.api_key}` },
      body: multipartBody({ messaging_product: 'whatsapp', type: file.contentType }, { field: 'file', file }),
      timeoutMs: s.OUTBOUND_SEND_TIMEOUT_MS,
    });
  } catch (err) {
    if (err instanceof NotReached || err instanceof NoAnswer) return { outcome: 'retry', reason: `WhatsApp media upload: ${err.message}` };
    throw err;
  }
  return whatsappAnswer(answer, `WhatsApp refused the upload of ${file.name}`);
}

/** How a file goes on WhatsApp: JPEG and PNG as an image (at most 5 MB, checked at write time), the rest as a document. */
export const whatsappMediaType = (file: OutgoingFile): 'image' | 'document' => (WHATSAPP_IMAGE_TYPES.has(file.contentType) ? 'image' : 'document');
