import { jsonOf, providerRequest, retryAfterMs } from '../http';
import { byStatus, transportFailure, type OutgoingReply, type SendResult, type SenderSettings } from '../types';

/**
 * SMS through Twilio Programmable Messaging: POST /2010-04-01/Accounts/{AccountSid}/Messages.json, form
 * fields To, From (or MessagingServiceSid), Body, StatusCallback; basic auth AccountSid:AuthToken. The body
 * goes whole: Twilio splits it into segments and says how many (`num_segments`), which we show. Errors are
 * `{code, message, more_info, status}` (20003 authenticate, 21211 invalid To, 21610 unsubscribed recipient).
 */
export async function sendTwilio(
  s: SenderSettings,
  creds: { account_sid: string; auth_token: string; phone_number?: string; messaging_service_sid?: string },
  r: OutgoingReply,
): Promise<SendResult> {
  const form = new URLSearchParams({ To: r.to, Body: r.text });
  // A messaging service picks the sender itself (sticky sender, number pools); else the number the customer
  // wrote to answers them, so the conversation stays on one thread on their phone.
  if (creds.messaging_service_sid) form.set('MessagingServiceSid', creds.messaging_service_sid);
  else form.set('From', r.from ?? creds.phone_number ?? '');
  if (r.statusCallbackUrl) form.set('StatusCallback', r.statusCallbackUrl);
  // MMS: one MediaUrl per file (at most 10), each a signed link Twilio fetches from this service.
  for (const url of r.mediaUrls ?? []) form.append('MediaUrl', url);
  let answer;
  try {
    answer = await providerRequest(`${s.TWILIO_API_URL.replace(/\/$/, '')}/2010-04-01/Accounts/${encodeURIComponent(creds.account_sid)}/Messages.json`, {
      method: 'POST',
      headers: {
        accept: 'application/json',
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${creds.account_sid}:${creds.auth_token}`).toString('base64')}`,
      },
      body: form.toString(),
      timeoutMs: s.OUTBOUND_SEND_TIMEOUT_MS,
    });
  } catch (err) {
    return transportFailure(err, 'Twilio');
  }
  const body = jsonOf(answer.text);
  if (answer.status >= 200 && answer.status < 300 && typeof body.sid === 'string') {
    const segments = Number(body.num_segments);
    return { outcome: 'sent', providerMessageId: body.sid, ...(Number.isInteger(segments) && segments > 0 ? { segments } : {}) };
  }
  const code = body.code !== undefined && body.code !== null ? String(body.code) : undefined;
  const message = typeof body.message === 'string' ? body.message : `HTTP ${answer.status}`;
  return byStatus(answer, `Twilio refused the SMS: ${message}`, code, retryAfterMs(answer.headers['retry-after']));
}
