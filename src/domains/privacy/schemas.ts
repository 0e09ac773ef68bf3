import { z } from 'zod';

const at = z.string().meta({ examples: ['2026-11-02T10:14:00.000Z'] });

export const erasureParams = z.object({ customer_id: z.uuid(), erasure_id: z.uuid() });

export const eraseCustomerBody = z.strictObject({
  reason: z
    .string()
    .trim()
    .min(1)
    .max(500)
    .meta({ description: "Why (kept in the audit log), e.g. the request's reference.", examples: ['GDPR art. 17 request #2291 received 2026-11-02'] }),
});

export const erasureView = z
  .object({
    id: z.uuid().meta({ examples: ['3c5e7a90-1b2d-4f6a-8c9e-0d1f2a3b4c5d'] }),
    customer_id: z.uuid().meta({ examples: ['160c0c4b-9966-4dc1-a916-8407eb10d74e'] }),
    state: z.enum(['queued', 'done', 'failed']).meta({ examples: ['queued'] }),
    created_at: at,
    completed_at: at.nullable(),
  })
  .meta({ id: 'CustomerErasure' });

export const redactParams = z.object({ ticket_id: z.uuid(), event_id: z.uuid() });

export const redactBody = z.strictObject({
  reason: z.string().trim().min(1).max(500).optional().meta({ description: 'Why (kept in the audit log).', examples: ['Customer pasted a card number'] }),
});

export const redactedEvent = z
  .object({
    id: z.uuid().meta({ examples: ['8d2f4b6a-0c1e-4a3b-9d5f-7e6a8b9c0d1e'] }),
    ticket_id: z.uuid().meta({ examples: ['3f2b8c4e-6a1d-4e7f-9b2c-5d8e1a4f7c3b'] }),
    kind: z.string().meta({ examples: ['inbound_email'] }),
    body: z.string().meta({ examples: ['[erased]'] }),
    redacted_at: at.nullable(),
  })
  .meta({ id: 'RedactedEvent' });
