import { z } from 'zod';

/** Customer exports (issue 38, access request): the request, the job as a client polls it, the download link's token. */

const at = z.string().meta({ examples: ['2025-03-02T16:40:11.000Z'] });
const EXPORT_ID = '0195a1c4-7d2e-7b31-9f0a-6c2d8e4b1a57';
const CUSTOMER_ID = '160c0c4b-9966-4dc1-a916-8407eb10d74e';
const TOKEN = 'eyJ0IjoiNmY4ZSIsIngiOiIwMTk1YTFjNCJ9.Zq3v9Lw2Rk7Tn5Bm8Hc4Jd6Fg1Ys0Pa2Ze4Ui6';

/** The states of an export, as customer_jobs holds them. */
export const EXPORT_STATES = ['queued', 'done', 'failed'] as const;

export const customerExportParams = z.object({ customer_id: z.uuid(), export_id: z.uuid() });

export const requestExportBody = z.strictObject({
  reason: z
    .string()
    .trim()
    .max(500)
    .optional()
    .meta({ examples: ['DSAR-2025-031, by email'] }),
});

export const customerExport = z
  .object({
    id: z.uuid().meta({ examples: [EXPORT_ID] }),
    customer_id: z.uuid().meta({ examples: [CUSTOMER_ID] }),
    kind: z.literal('export'),
    state: z.enum(EXPORT_STATES).meta({ examples: ['done'] }),
    created_at: at,
    completed_at: z.string().nullable().meta({ examples: ['2025-03-02T16:40:19.000Z'] }),
    expires_at: z.string().nullable().meta({ examples: ['2025-03-05T16:40:19.000Z'] }),
    download_url: z
      .string()
      .nullable()
      .meta({
        description: 'Signed, until expires_at.',
        examples: [`https://helpdesk.example.com/v1/customer-exports/${TOKEN}`],
      }),
    error: z.string().nullable().meta({ examples: ['the export is larger than 4294967296 bytes'] }),
  })
  .meta({ id: 'CustomerExport' });

/**
 * The export document (GET /v1/customer-exports/{token}), as the job writes it (src/domains/customers/export.ts);
 * documented for clients, never parsed by the router (the bytes are streamed from the file store).
 */
const when = z.string();
const maybeWhen = z.string().nullable();
const row = z.record(z.string(), z.unknown());
export const customerExportDocument = z
  .object({
    format: z.literal('helpdesk.customer_export.v1'),
    export_id: z.uuid(),
    workspace_id: z.uuid(),
    generated_at: when,
    expires_at: when,
    customer: row,
    handles: z.array(z.object({ kind: z.string(), handle: z.string(), unreachable_at: maybeWhen })),
    tickets: z.array(
      z.object({
        id: z.uuid(),
        subject: z.string(),
        description: z.string(),
        status: z.string(),
        priority: z.string(),
        source: z.string(),
        created_at: when,
        updated_at: when,
        solved_at: maybeWhen,
        merged_into_id: z.uuid().nullable(),
        events: z.array(
          z.object({
            id: z.uuid(),
            kind: z.string(),
            actor_type: z.string(),
            actor_name: z.string().nullable(),
            body: z.string(),
            created_at: when,
            redacted_at: maybeWhen,
            attachments: z.array(z.object({ id: z.uuid(), name: z.string(), content_type: z.string(), size: z.number().int(), download_url: z.string() })),
          }),
        ),
      }),
    ),
    // The flat lists are typed in the description (the document's size in the OpenAPI budget goes to the tickets).
    csat: z.array(row).meta({ description: 'id, ticket_id, score, comment, created_at' }),
    intake: z.array(row).meta({ description: 'channel, provider_message_id, ticket_id, first_seen_at, last_seen_at, duplicate_count' }),
    transcripts: z.array(row).meta({ description: 'id, transcript_id, external_ticket_id, provider_event_id, type, occurred_at, status, subject, priority, requester, received_at' }),
  })
  .meta({ id: 'CustomerExportDocument' });

const T1 = '0195a1b0-3c4d-7e5f-8a6b-7c8d9e0f1a2b';
const AT = '2025-03-02T16:40:11.000Z';
/** The document's example (hand-written: a sampler's would be placeholders). */
export const EXAMPLE_EXPORT_DOCUMENT = {
  format: 'helpdesk.customer_export.v1',
  export_id: EXPORT_ID,
  workspace_id: '6f8e2a41-93c5-4b7d-a0e2-5c1d9b3f7a62',
  generated_at: '2025-03-02T16:40:19.000Z',
  expires_at: '2025-03-05T16:40:19.000Z',
  customer: { id: CUSTOMER_ID, display_name: 'Maya Fischer' },
  handles: [{ kind: 'whatsapp_id', handle: '4915112345678', unreachable_at: null }],
  tickets: [
    {
      id: T1,
      subject: 'Where is my pallet?',
      description: 'Pallet #1042 is late.',
      status: 'solved',
      priority: 'normal',
      source: 'email',
      created_at: AT,
      updated_at: AT,
      solved_at: AT,
      merged_into_id: null,
      events: [
        {
          id: '0195a1b0-3c4d-7e5f-8a6b-7c8d9e0f1a2c',
          kind: 'inbound_email',
          actor_type: 'customer',
          actor_name: 'Maya Fischer',
          body: 'Receipt attached.',
          created_at: AT,
          redacted_at: null,
          attachments: [{ id: '0195a1b0-3c4d-7e5f-8a6b-7c8d9e0f1a2d', name: 'receipt.pdf', content_type: 'application/pdf', size: 48213, download_url: `/v1/files/${TOKEN}` }],
        },
      ],
    },
  ],
  csat: [],
  intake: [],
  transcripts: [],
};

export const exportTokenParams = z.object({ export_token: z.string().min(1).max(600).meta({ examples: [TOKEN] }) });

export type RequestExportInput = z.output<typeof requestExportBody>;
