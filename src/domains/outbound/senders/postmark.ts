import { jsonOf, providerRequest, retryAfterMs } from '../http';
import { byStatus, transportFailure, type OutgoingReply, type SendResult, type SenderSettings } from '../types';

/**
 * Email through Postmark's API (POST /email, X-Postmark-Server-Token), threaded by the headers every mail
 * client reads: our Message-ID, In-Reply-To the customer's last message, References the thread. Postmark
 * answers `{MessageID, ErrorCode: 0}`; its delivery and bounce webhooks name that MessageID.
 * Errors: 401 with ErrorCode 10 (bad token), 422 with ErrorCode 300 (invalid request) or 406 (inactive
 * recipient); 429 and 5xx are retried.
 */
export async function sendPostmark(s: SenderSettings, creds: { server_token: string; from_address: string; from_name?: string }, r: OutgoingReply): Promise<SendResult> {
  const e = r.email!;
  const headers = [
    { Name: 'Message-ID', Value: `<${e.messageId}>` },
    ...(e.inReplyTo ? [{ Name: 'In-Reply-To', Value: `<${e.inReplyTo}>` }] : []),
    ...(e.references.length > 0 ? [{ Name: 'References', Value: e.references.map((id) => `<${id}>`).join(' ') }] : []),
  ];
  const from = creds.from_name ? `"${creds.from_name.replace(/["\\\r\n]/g, '')}" <${creds.from_address}>` : creds.from_address;
  let answer;
  try {
    answer = await providerRequest(`${s.POSTMARK_API_URL.replace(/\/$/, '')}/email`, {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json', 'x-postmark-server-token': creds.server_token },
      body: JSON.stringify({ From: from, To: r.to, Subject: e.subject, TextBody: r.text, Headers: headers, MessageStream: 'outbound', ...(r.emailAttachments?.length ? { Attachments: r.emailAttachments } : {}) }),
      timeoutMs: s.OUTBOUND_SEND_TIMEOUT_MS,
    });
  } catch (err) {
    return transportFailure(err, 'Postmark');
  }
  const body = jsonOf(answer.text);
  const code = body.ErrorCode !== undefined ? String(body.ErrorCode) : undefined;
  if (answer.status >= 200 && answer.status < 300 && (body.ErrorCode === 0 || body.ErrorCode === undefined) && typeof body.MessageID === 'string') {
    return { outcome: 'sent', providerMessageId: body.MessageID, messageId: e.messageId };
  }
  const message = typeof body.Message === 'string' ? body.Message : `HTTP ${answer.status}`;
  return byStatus(answer, `Postmark refused the email: ${message}`, code, retryAfterMs(answer.headers['retry-after']));
}
