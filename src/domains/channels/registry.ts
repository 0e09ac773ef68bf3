/**
 * Channel ids known to the service. Tickets record their source as one of these, `api` or `web`; the
 * channels issue grows each entry into a full registry row with its adapter.
 */
export const CHANNEL_IDS = ['email', 'sms', 'whatsapp', 'telegram', 'web_chat', 'facebook', 'instagram', 'line', 'viber'] as const;
export type ChannelId = (typeof CHANNEL_IDS)[number];

export const TICKET_SOURCES = [...CHANNEL_IDS, 'api', 'web'] as const;
export type TicketSource = (typeof TICKET_SOURCES)[number];
