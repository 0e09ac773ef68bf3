import { z } from 'zod';
import { intParam } from '../../http/params';
import { WEBHOOK_PROVIDERS } from './providers';

export const webhookParams = z.object({ provider: z.string().max(32), integration_id: z.uuid() });
export const integrationParams = z.object({ integration_id: z.uuid() });
export const transcriptParams = z.object({ transcript_id: z.uuid() });

export const createIntegrationBody = z.strictObject({
  provider: z.enum(WEBHOOK_PROVIDERS),
  name: z.string().trim().min(1).max(120),
  signing_secret: z.string().min(8).max(512).optional(),
});
export const signingSecretBody = z.strictObject({
  signing_secret: z.union([z.literal(''), z.string().min(8).max(512)]),
});

export const pageQuery = z.strictObject({ limit: intParam(1, 200).default(50), offset: intParam(0, 1_000_000).default(0) });

export const integration = z.object({
  id: z.string(),
  provider: z.enum(WEBHOOK_PROVIDERS),
  name: z.string(),
  signing_secret_set: z.boolean(),
  webhook_url: z.string().describe('Contains the integration id, which selects the workspace: treat the whole URL as a secret.'),
  created_at: z.string(),
});
export const integrationList = z.object({ integrations: z.array(integration) });

export const webhookResult = z.object({
  status: z.enum(['ok', 'ignored', 'accepted']),
  transcript_id: z.string().optional(),
  external_ticket_id: z.string().optional(),
  challenge: z.string().optional(),
});
/** Documents the body; the handler reads the raw bytes (signatures are over exactly what was sent). */
export const webhookBody = z.record(z.string(), z.unknown()).describe("The provider's own payload, verbatim");

const transcriptEvent = z.object({
  id: z.string(),
  provider_event_id: z.string().nullable(),
  type: z.string(),
  occurred_at: z.string().nullable(),
  status: z.string().nullable(),
  subject: z.string().nullable(),
  priority: z.string().nullable(),
  requester: z.string().nullable(),
  received_at: z.string(),
  raw: z.unknown(),
});
export const transcript = z.object({
  id: z.string(),
  integration_id: z.string(),
  provider: z.string(),
  external_ticket_id: z.string(),
  event_count: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
  limit: z.number().int(),
  offset: z.number().int(),
  events: z.array(transcriptEvent),
});
export const transcriptList = z.object({
  limit: z.number().int(),
  offset: z.number().int(),
  transcripts: z.array(z.object({ id: z.string(), external_ticket_id: z.string(), event_count: z.number().int(), created_at: z.string(), updated_at: z.string() })),
});
