import { jsonOf, providerRequest } from '../http';
import { multipartBody, type OutgoingFile } from '../attachments';
import type { ProviderAnswer } from '../http';
import { byStatus, transportFailure, type OutgoingReply, type SendResult, type SenderSettings } from '../types';

/**
 * Telegram Bot API: POST /bot{token}/sendMessage with `chat_id`, `text` (at most 4096 characters, checked
 * when the reply is written) and `reply_parameters` naming the customer's message, so the answer shows as a
 * reply in their chat. Answers `{ok: true, result: Message}`; errors `{ok: false, error_code, description,
 * parameters?: {retry_after}}`. 403 "bot was blocked by the user" means this chat cannot be reached any more.
 */
export async function sendTelegram(s: SenderSettings, creds: { bot_token: string }, r: OutgoingReply): Promise<SendResult> {
  const payload = {
    chat_id: r.to,
    text: r.text,
    // The customer may have deleted their message: the answer still goes, just not as a quoted reply.
    ...(r.replyToMessageId !== undefined ? { reply_parameters: { message_id: r.replyToMessageId, allow_sending_without_reply: true } } : {}),
  };
  let answer;
  try {
    answer = await providerRequest(`${s.TELEGRAM_API_URL.replace(/\/$/, '')}/bot${creds.bot_token}/sendMessage`, {
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/json' },
      body: JSON.stringify(payload),
      timeoutMs: s.OUTBOUND_SEND_TIMEOUT_MS,
    });
  } catch (err) {
    return transportFailure(err, 'Telegram');
  }
  return telegramAnswer(answer, r.to);
}

/** Telegram's answer to a send (sendMessage, sendDocument) as a send result. */
function telegramAnswer(answer: ProviderAnswer, to: string): SendResult {
  const body = jsonOf(answer.text);
  const result = (body.result ?? {}) as { message_id?: unknown; chat?: { id?: unknown } };
  if (answer.status >= 200 && answer.status < 300 && body.ok === true && typeof result.message_id === 'number') {
    // The same `chat:message` pair the inbound adapter uses as a Telegram message's id.
    return { outcome: 'sent', providerMessageId: `${String(result.chat?.id ?? to)}:${result.message_id}` };
  }
  const description = typeof body.description === 'string' ? body.description : `HTTP ${answer.status}`;
  const code = body.error_code !== undefined ? String(body.error_code) : String(answer.status);
  const params = (body.parameters ?? {}) as { retry_after?: unknown };
  const retryAfter = typeof params.retry_after === 'number' ? params.retry_after * 1000 : undefined;
  const r403 = answer.status === 403;
  const res = byStatus(answer, `Telegram refused the message: ${description}`, code, retryAfter);
  // Blocked by the user, or the user deactivated: nothing this bot sends will reach them.
  return r403 && res.outcome === 'failed' ? { ...res, unreachable: true } : res;
}

/**
 * A file as its own Telegram message: POST /bot{token}/sendDocument, multipart/form-data with `chat_id`, the file
 * in `document` (uploaded, streamed from the store: at most 50 MB, checked when the reply is written), and the
 * reply text as `caption` when it fits (1024 characters). The answer is a Message like sendMessage's.
 */
export async function sendTelegramDocument(
  s: SenderSettings,
  creds: { bot_token: string },
  r: { to: string; file: OutgoingFile; caption?: string; replyToMessageId?: number },
): Promise<SendResult> {
  const fields: Record<string, string> = { chat_id: r.to };
  if (r.caption) fields.caption = r.caption;
  if (r.replyToMessageId !== undefined) fields.reply_parameters = JSON.stringify({ message_id: r.replyToMessageId, allow_sending_without_reply: true });
  let answer;
  try {
    answer = await providerRequest(`${s.TELEGRAM_API_URL.replace(/\/$/, '')}/bot${creds.bot_token}/sendDocument`, {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: multipartBody(fields, { field: 'document', file: r.file }),
      timeoutMs: s.OUTBOUND_SEND_TIMEOUT_MS,
    });
  } catch (err) {
    return transportFailure(err, 'Telegram');
  }
  return telegramAnswer(answer, r.to);
}
