/**
 * Every channel the service knows: one row each. Tickets record their source as a channel id, `api` or
 * `web`. A channel without an adapter can still hold a connection (adapter_available: false).
 */
import type { ChannelAdapter } from './adapters/types';
import { emailAdapter } from './adapters/email';
import { smsAdapter } from './adapters/sms';
import { telegramAdapter } from './adapters/telegram';
import { webChatAdapter } from './adapters/web-chat';
import { whatsappAdapter } from './adapters/whatsapp';

export interface ChannelDefinition {
  id: string;
  display_name: string;
  ticket_source: string;
  /** What identifies a customer on this channel. */
  handle_kind: 'email' | 'phone' | 'whatsapp_id' | 'telegram_user' | 'visitor_id' | 'page_scoped_id' | 'line_user' | 'viber_user';
  outbound_supported: boolean;
  /** Config keys that describe the connection to an operator and are safe to read back; all else is ***. */
  safe_config_keys: readonly string[];
  /** Config keys holding credentials: sealed at rest (secrets_sealed), never kept in the config column. */
  secret_config_keys: readonly string[];
  /**
   * What a reply needs from the connection to be sent, as alternatives (any one complete set will do); empty
   * when a reply needs nothing from it (web chat: the widget reads it). Null: no sender exists.
   */
  send_requires: readonly (readonly string[])[] | null;
  adapter: ChannelAdapter | null;
}

export const CHANNEL_IDS = ['email', 'sms', 'whatsapp', 'telegram', 'web_chat', 'facebook', 'instagram', 'line', 'viber'] as const;
export type ChannelId = (typeof CHANNEL_IDS)[number];

export const TICKET_SOURCES = [...CHANNEL_IDS, 'api', 'web'] as const;
export type TicketSource = (typeof TICKET_SOURCES)[number];

const DESCRIPTORS = ['label', 'display_name', 'region', 'timezone', 'language'] as const;

export const CHANNELS: Record<ChannelId, ChannelDefinition> = {
  email: {
    id: 'email',
    display_name: 'Email',
    ticket_source: 'email',
    handle_kind: 'email',
    outbound_supported: true,
    safe_config_keys: [...DESCRIPTORS, 'inbound_address', 'from_name', 'from_address', 'signature', 'webhook_username'],
    // Postmark: the server token sends, webhook_username/webhook_password guard its webhooks (basic auth).
    secret_config_keys: ['server_token', 'webhook_password'],
    // The connected mailbox sends without any of these (see the channels service).
    send_requires: [['server_token', 'from_address']],
    adapter: emailAdapter,
  },
  sms: {
    id: 'sms',
    display_name: 'SMS (Twilio)',
    ticket_source: 'sms',
    handle_kind: 'phone',
    outbound_supported: true,
    safe_config_keys: [...DESCRIPTORS, 'phone_number', 'messaging_service_sid', 'account_sid'],
    secret_config_keys: ['auth_token'],
    send_requires: [['account_sid', 'auth_token', 'phone_number'], ['account_sid', 'auth_token', 'messaging_service_sid']],
    adapter: smsAdapter,
  },
  whatsapp: {
    id: 'whatsapp',
    display_name: 'WhatsApp',
    ticket_source: 'whatsapp',
    handle_kind: 'whatsapp_id',
    outbound_supported: true,
    safe_config_keys: [...DESCRIPTORS, 'phone_number_id', 'display_phone_number', 'business_account_id'],
    // api_key is the system user's token (an `access_token` key is refused as a misplaced OAuth token).
    secret_config_keys: ['api_key', 'app_secret', 'verify_token'],
    send_requires: [['phone_number_id', 'api_key']],
    adapter: whatsappAdapter,
  },
  telegram: {
    id: 'telegram',
    display_name: 'Telegram',
    ticket_source: 'telegram',
    handle_kind: 'telegram_user',
    outbound_supported: true,
    safe_config_keys: [...DESCRIPTORS, 'bot_username'],
    secret_config_keys: ['bot_token', 'secret_token'],
    send_requires: [['bot_token']],
    adapter: telegramAdapter,
  },
  web_chat: {
    id: 'web_chat',
    display_name: 'Web chat',
    ticket_source: 'web_chat',
    handle_kind: 'visitor_id',
    outbound_supported: true,
    safe_config_keys: [...DESCRIPTORS, 'widget_color', 'greeting', 'allowed_origins'],
    secret_config_keys: [],
    send_requires: [],
    adapter: webChatAdapter,
  },
  facebook: { id: 'facebook', display_name: 'Facebook Messenger', ticket_source: 'facebook', handle_kind: 'page_scoped_id', outbound_supported: false, safe_config_keys: [...DESCRIPTORS, 'page_id', 'page_name'], secret_config_keys: [], send_requires: null, adapter: null },
  instagram: { id: 'instagram', display_name: 'Instagram', ticket_source: 'instagram', handle_kind: 'page_scoped_id', outbound_supported: false, safe_config_keys: [...DESCRIPTORS, 'account_id', 'username'], secret_config_keys: [], send_requires: null, adapter: null },
  line: { id: 'line', display_name: 'LINE', ticket_source: 'line', handle_kind: 'line_user', outbound_supported: false, safe_config_keys: [...DESCRIPTORS, 'channel_id'], secret_config_keys: [], send_requires: null, adapter: null },
  viber: { id: 'viber', display_name: 'Viber', ticket_source: 'viber', handle_kind: 'viber_user', outbound_supported: false, safe_config_keys: [...DESCRIPTORS, 'bot_name'], secret_config_keys: [], send_requires: null, adapter: null },
};

/** Own keys only: an id such as `constructor` or `__proto__` names no channel. */
export const channelById = (id: string): ChannelDefinition | undefined => (Object.hasOwn(CHANNELS, id) ? CHANNELS[id as ChannelId] : undefined);
export const inboundPath = (id: string) => `/v1/ingest/${id}`;
