import { z } from 'zod';
import { defineOperation } from '../../define-operation';
import { isAttachmentContent } from '../channels/adapters/email';
import { HOOK_CHANNELS } from './service';

const hookParams = z.object({
  // Permissive (another channel is 404 not_found), documented as the channels a provider webhook serves.
  channel: z.string().min(1).max(64).meta({ enum: [...HOOK_CHANNELS], examples: ['sms'] } as never),
  inbound_token: z.string().min(1).max(200).meta({ examples: ['itk_Qm9yZWFsLWV4YW1wbGUtdG9rZW4tMDE5Mw'] }),
});

const hookResult = z.object({
  status: z.string().meta({ examples: ['ok'] }),
  ticket_id: z.uuid().optional(),
  statuses_applied: z.number().int().optional(),
});

export const providerHookOperations = [
  defineOperation({
    id: 'receive_provider_hook',
    method: 'post',
    path: '/v1/hooks/{channel}/{inbound_token}',
    summary: "A messaging provider's own webhook, as the provider sends it (no credential)",
    description:
      "Point the provider's webhook here: sms (Twilio form posts, verified with X-Twilio-Signature and the connection's auth_token over PUBLIC_BASE_URL or the request's own URL), whatsapp (Meta's JSON, X-Hub-Signature-256 with app_secret), telegram (Bot API updates, X-Telegram-Bot-Api-Secret-Token = secret_token), email (Postmark inbound, delivery and bounce webhooks; basic auth when webhook_username/webhook_password are set). Customer messages are ingested like POST /v1/ingest/{channel}; status callbacks (Twilio StatusCallback, WhatsApp statuses, Postmark Delivery/Bounce) move the delivery of replies. A bad signature is 401 hook_signature_invalid and writes nothing. Twilio is answered with empty TwiML.",
    access: 'public',
    rawBody: true,
    chargeRefusals: true,
    params: hookParams,
    requestHeaders: [
      { name: 'X-Twilio-Signature', description: "sms (Twilio): base64 HMAC-SHA1 of the URL and the sorted form fields with the connection's auth_token; checked when the connection has one.", example: 'RSOYDt4T1cUTdK1PDd93/VVr8B8=' },
      { name: 'X-Hub-Signature-256', description: "whatsapp (Meta): `sha256=` and the hex HMAC-SHA256 of the raw body with the connection's app_secret; checked when the connection has one.", example: 'sha256=3b2f0c9a7d1e4f6a8b5c2d9e0f1a7b3c4d5e6f708192a3b4c5d6e7f8091a2b3c' },
      { name: 'X-Telegram-Bot-Api-Secret-Token', description: "telegram: the secret_token given to setWebhook, compared with the connection's; checked when the connection has one.", example: 'tg-secret-3f9c2a7b' },
      { name: 'Authorization', description: "email (Postmark): `Basic` with the connection's webhook_username and webhook_password, when they are set." },
    ],
    body: z.record(z.string(), z.unknown()).meta({ description: "The provider's payload, exactly as it sends it (form-encoded for Twilio, JSON for the others)." }),
    response: { status: 200, description: 'Accepted (Twilio: `<Response></Response>` as text/xml)', schema: hookResult, text: ['text/xml'] },
    errors: ['hook_signature_invalid', 'channel_payload_invalid', 'payload_too_complex', 'throttled'],
    example: {
      params: { channel: 'telegram', inbound_token: 'itk_Qm9yZWFsLWV4YW1wbGUtdG9rZW4tMDE5Mw' },
      request: { update_id: 10000, message: { message_id: 1365, from: { id: 1111111, first_name: 'Ada' }, chat: { id: 1111111, type: 'private' }, date: 1741944600, text: 'Where is my order?' } },
      response: { status: 'ok', ticket_id: 'b3e1f0a2-7c4d-4e9b-8a16-5d2c9f7e3b40' },
    },
    // Postmark's inbound email carries its files as base64 inside the JSON (up to INGEST_EMAIL_MAX_BYTES): read as it arrives.
    spooledJson: { when: (p) => p.channel === 'email', spill: (path) => isAttachmentContent(path, []) },
    handler: async ({ params, raw }, s) => s.providerHooks.receive(params.channel, params.inbound_token, raw!),
  }),
  defineOperation({
    id: 'verify_provider_hook',
    method: 'get',
    path: '/v1/hooks/{channel}/{inbound_token}',
    summary: "Meta's webhook subscription handshake (WhatsApp)",
    description: 'Answers hub.challenge as text/plain when hub.mode is subscribe and hub.verify_token is the whatsapp connection\'s verify_token; 401 hook_signature_invalid otherwise.',
    access: 'public',
    chargeRefusals: true,
    params: hookParams,
    query: z.object({
      'hub.mode': z.string().max(64).optional().meta({ examples: ['subscribe'] }),
      'hub.verify_token': z.string().max(1024).optional().meta({ examples: ['wa-verify-3f9c2a7b'] }),
      'hub.challenge': z.string().max(1024).optional().meta({ examples: ['1158201444'] }),
    }),
    response: { status: 200, description: 'The challenge, as text/plain', text: ['text/plain'] },
    errors: ['hook_signature_invalid'],
    handler: async ({ params, query }, s) => s.providerHooks.handshake(params.channel, params.inbound_token, query),
  }),
];
