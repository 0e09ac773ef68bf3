import { z } from 'zod';
import { intParam } from '../../lib/params';
import { afterParam, pageSchema } from '../../lib/paging';
import { EVENT_TYPES } from '../events/types';

const at = z.string().meta({ examples: ['2025-03-14T09:26:53.412Z'] });
const ENDPOINT_ID = '7c1e4b2a-9d3f-4e8a-b6c5-2f1a0d9e8c7b';
const TYPES = ['ticket.created', 'ticket.status_changed', 'message.created'];

export const endpointParams = z.object({ endpoint_id: z.uuid() });

const url = z.url({ protocol: /^https?$/ }).max(2048).meta({ description: 'https:// (http:// only for loopback where the deployment allows it).', examples: ['https://hooks.example.com/helpdesk'] });
// Unknown types are a 422 (event_type_unknown) from the service, which names them, not a schema error.
const eventTypes = z.array(z.string().max(100)).min(1).max(EVENT_TYPES.length).meta({ description: `Any of: ${EVENT_TYPES.join(', ')}.`, examples: [TYPES] });
const description = z.string().trim().max(500).meta({ examples: ['Sync to the CRM'] });

export const createEndpointBody = z.strictObject({
  url,
  event_types: eventTypes,
  description: description.optional(),
  enabled: z.boolean().optional(),
});
export type CreateEndpointInput = z.output<typeof createEndpointBody>;

export const patchEndpointBody = z
  .strictObject({ url: url.optional(), event_types: eventTypes.optional(), description: description.optional(), enabled: z.boolean().optional() })
  .refine((b) => Object.keys(b).length > 0, { message: 'name at least one field to change' });
export type PatchEndpointInput = z.output<typeof patchEndpointBody>;

export const replayBody = z.strictObject({
  since: z.iso.datetime({ offset: true }).meta({ description: 'Events that occurred at or after this time are delivered again.', examples: ['2025-03-14T00:00:00Z'] }),
});

const endpointFields = {
  id: z.uuid().meta({ examples: [ENDPOINT_ID] }),
  url: z.string().meta({ examples: ['https://hooks.example.com/helpdesk'] }),
  description: z.string().meta({ examples: ['Sync to the CRM'] }),
  event_types: z.array(z.enum(EVENT_TYPES)).meta({ examples: [TYPES] }),
  enabled: z.boolean().meta({ examples: [true] }),
  disabled_reason: z.enum(['admin', 'failures']).nullable().meta({ description: '`failures`: disabled by the service after OUTBOUND_WEBHOOK_DISABLE_AFTER_FAILURES consecutive failed events.', examples: [null] }),
  consecutive_failures: z.number().int().meta({ examples: [0] }),
  previous_secret_expires_at: z.string().nullable().meta({ description: 'After a rotation: until when the previous secret still signs beside the new one.', examples: [null] }),
  circuit: z.enum(['closed', 'open', 'probing']).meta({
    description: '`open`: OUTBOUND_WEBHOOK_CIRCUIT_FAILURES attempts in a row failed, so nothing is sent until `circuit_open_until`; `probing`: one event at a time is sent until one is delivered; `closed`: sending normally.',
    examples: ['closed'],
  }),
  circuit_open_until: z.string().nullable().meta({ examples: [null] }),
  created_at: at,
  updated_at: at,
};

export const endpoint = z.object(endpointFields).meta({ id: 'WebhookEndpoint' });
export const endpointWithSecret = z
  .object({
    ...endpointFields,
    secret: z.string().meta({ description: 'The signing secret (`whsec_` + base64). Shown exactly once, in this response.', examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'] }),
  })
  .meta({ id: 'WebhookEndpointWithSecret' });
export const endpointList = z.object({ webhook_endpoints: z.array(endpoint) });

/** The deliveries list reads newest attempt first. */
export const ATTEMPT_SORT = '-seq';

export const deliveriesQuery = z.strictObject({
  limit: intParam(1, 500).default(100),
  after: afterParam({ [ATTEMPT_SORT]: 'sequence' }).optional(),
});

export const deliveryAttempt = z
  .object({
    id: z.uuid(),
    event_id: z.uuid().meta({ description: 'The `webhook-id` of the request: the same for every attempt of one event.' }),
    event_type: z.enum(EVENT_TYPES).meta({ examples: ['ticket.created'] }),
    attempt: z.number().int().meta({ examples: [1] }),
    outcome: z.enum(['delivered', 'retrying', 'failed']).meta({ examples: ['retrying'] }),
    status_code: z.number().int().nullable().meta({ description: 'The receiver\'s status; null when none came (refused connection, time-out).', examples: [500] }),
    duration_ms: z.number().int().meta({ examples: [184] }),
    error: z.string().nullable().meta({ examples: ['HTTP 500'] }),
    next_retry_at: z.string().nullable().meta({ examples: ['2025-03-14T09:27:03.412Z'] }),
    created_at: at,
  })
  .meta({ id: 'DeliveryAttempt' });
export const deliveryList = pageSchema('deliveries', deliveryAttempt);

export const replayResult = z.object({ replayed: z.number().int().meta({ description: 'Events queued for delivery again.', examples: [12] }) });
