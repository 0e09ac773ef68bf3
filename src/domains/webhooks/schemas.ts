import { z } from 'zod';
import { intParam } from '../../lib/params';
import { afterParam, pageSchema } from '../../lib/paging';
import { WEBHOOK_PROVIDERS } from './providers';

const INTEGRATION_ID = '55d7337e-1d0a-49fc-9826-925ba40df035';
const TRANSCRIPT_ID = '215670dc-b708-4c27-9393-0b9ca7d8935d';
const at = (t: string) => z.string().meta({ examples: [`2025-03-14T${t}.000Z`] });
const SECRET = 'whsec_9fK2mQ7xV4pL8zR1tY6nB3cW';

/** `provider` stays a string so another value is the 404 the contract promises; the document lists the three (`enum`). */
export const webhookParams = z.object({ provider: z.string().max(32).meta({ enum: [...WEBHOOK_PROVIDERS], examples: ['zendesk'] } as never), integration_id: z.uuid() });
export const integrationParams = z.object({ integration_id: z.uuid() });
export const transcriptParams = z.object({ transcript_id: z.uuid() });

export const createIntegrationBody = z.strictObject({
  provider: z.enum(WEBHOOK_PROVIDERS),
  name: z.string().trim().min(1).max(120).meta({ examples: ['Zendesk (legacy EU account)'] }),
  signing_secret: z.string().min(8).max(512).optional().meta({ examples: [SECRET] }),
});
export const signingSecretBody = z.strictObject({
  signing_secret: z.union([z.literal(''), z.string().min(8).max(512)]).meta({ examples: [SECRET] }),
});

/** A transcript's own events (bounded by one conversation's history): limit and offset within it. */
export const pageQuery = z.strictObject({ limit: intParam(1, 200).default(50), offset: intParam(0, 1_000_000).default(0) });

/** An integration's transcripts read in one order, most recently active first (its cursor names it). */
export const TRANSCRIPT_SORT = '-updated_at';
export const transcriptsQuery = z.strictObject({ limit: intParam(1, 200).default(50), after: afterParam({ [TRANSCRIPT_SORT]: 'timestamp' }).optional() });

export const integration = z.object({
  id: z.string().meta({ examples: [INTEGRATION_ID] }),
  provider: z.enum(WEBHOOK_PROVIDERS),
  name: z.string().meta({ examples: ['Zendesk (legacy EU account)'] }),
  signing_secret_set: z.boolean().meta({ examples: [true] }),
  webhook_url: z
    .string()
    .describe('Contains the integration id, which selects the workspace: treat the whole URL as a secret.')
    .meta({ examples: [`https://api.helpdesk.example/v1/webhooks/zendesk/${INTEGRATION_ID}`] }),
  created_at: at('08:00:00'),
}).meta({ id: 'Integration' });
export const integrationList = z.object({ integrations: z.array(integration) });

export const webhookResult = z.object({
  status: z.enum(['ok', 'ignored', 'accepted']),
  transcript_id: z.string().optional().meta({ examples: [TRANSCRIPT_ID] }),
  external_ticket_id: z.string().optional().meta({ examples: ['35436'] }),
  challenge: z.string().optional().meta({ examples: ['d2f6c1a8e4b7'] }),
});
/** Documents the body; the handler reads the raw bytes (signatures are over exactly what was sent). */
export const webhookBody = z.record(z.string(), z.unknown()).describe("The provider's own payload, verbatim");

/** A Zendesk event subscription delivery, as a provider sends it (also the intake operation's example). */
export const EXAMPLE_ZENDESK_EVENT = {
  account_id: 22129848,
  detail: {
    actor_id: '8447388090494',
    assignee_id: '8447388090494',
    brand_id: '8447346621310',
    created_at: '2025-03-14T10:02:11Z',
    description: 'Our invoices page shows a blank screen since this morning.',
    group_id: '8447320466430',
    id: '35436',
    is_public: true,
    organization_id: '8447346622462',
    priority: 'HIGH',
    requester_id: '8447388090501',
    status: 'OPEN',
    subject: 'Invoices page is blank',
    submitter_id: '8447388090501',
    tags: ['billing', 'bug'],
    type: 'INCIDENT',
    updated_at: '2025-03-14T10:02:11Z',
    via: { channel: 'web_service' },
  },
  event: { meta: { sequence: { id: '7a3f9c2e', position: 1, total: 1 } } },
  id: 'cbe4028c-7239-495d-b020-f22348516046',
  subject: 'zen:ticket:35436',
  time: '2025-03-14T10:02:11.672Z',
  type: 'zen:event-type:ticket.created',
  zendesk_event_version: '2022-11-06',
};

const transcriptEvent = z.object({
  id: z.string().meta({ examples: ['8b4e2c7a-1d9f-4a63-b5e0-3f7c9d2a6e18'] }),
  provider_event_id: z.string().nullable().meta({ examples: [EXAMPLE_ZENDESK_EVENT.id] }),
  type: z.string().meta({ examples: [EXAMPLE_ZENDESK_EVENT.type] }),
  occurred_at: z.string().nullable().meta({ examples: [EXAMPLE_ZENDESK_EVENT.time] }),
  status: z.string().nullable().meta({ examples: ['open'] }),
  subject: z.string().nullable().meta({ examples: [EXAMPLE_ZENDESK_EVENT.detail.subject] }),
  priority: z.string().nullable().meta({ examples: ['high'] }),
  requester: z.string().nullable().meta({ examples: [EXAMPLE_ZENDESK_EVENT.detail.requester_id] }),
  received_at: at('10:02:12'),
  raw: z.unknown().meta({ examples: [EXAMPLE_ZENDESK_EVENT] }),
}).meta({ id: 'TranscriptEvent' });
const transcriptFields = {
  id: z.string().meta({ examples: [TRANSCRIPT_ID] }),
  external_ticket_id: z.string().meta({ examples: ['35436'] }),
  event_count: z.number().int().meta({ examples: [1] }),
  created_at: at('10:02:12'),
  updated_at: at('10:02:12'),
};
export const transcript = z.object({
  ...transcriptFields,
  // The secret half of the webhook URL: only admins (who may list integrations) get it.
  integration_id: z.string().optional().meta({ examples: [INTEGRATION_ID] }),
  provider: z.string().meta({ examples: ['zendesk'] }),
  limit: z.number().int().meta({ examples: [50] }),
  offset: z.number().int(),
  events: z.array(transcriptEvent),
}).meta({ id: 'Transcript' });
export const transcriptList = pageSchema('transcripts', z.object(transcriptFields));
