import { jsonOf, providerRequest, retryAfterMs } from '../http';
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
export async function sendWhatsapp(s: SenderSettings, creds: { api_key: string; phone_number_id?: string }, r: OutgoingReply): Promise<SendResult> {
  const phoneNumberId = r.phoneNumberId ?? creds.phone_number_id ?? '';
  const message = r.template
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
  const body = jsonOf(answer.text);
  const messages = Array.isArray(body.messages) ? (body.messages as { id?: unknown }[]) : [];
  if (answer.status >= 200 && answer.status < 300 && typeof messages[0]?.id === 'string') return { outcome: 'sent', providerMessageId: messages[0].id };
  const error = (body.error ?? {}) as { message?: unknown; code?: unknown; error_data?: { details?: unknown } };
  const code = error.code !== undefined ? String(error.code) : undefined;
  const details = typeof error.error_data?.details === 'string' ? ` (${error.error_data.details})` : '';
  const text = `WhatsApp refused the message: ${typeof error.message === 'string' ? error.message : `HTTP ${answer.status}`}${details}`;
  if (code && RATE_LIMITED.has(code)) return { outcome: 'retry', reason: text, code, ...(retryAfterMs(answer.headers['retry-after']) !== undefined ? { retryAfterMs: retryAfterMs(answer.headers['retry-after'])! } : {}) };
  return byStatus(answer, text, code, retryAfterMs(answer.headers['retry-after']));
}
