import { z } from 'zod';

/** The files' HTTP shapes (issue 34): an attachment as the API shows it, an upload's answer, a download's params. */

const ATTACHMENT_ID = '0195a3c1-7e42-7b8d-9c1f-5a2e4d6b8f01';
const SHA256 = '9f2c4e1a7b3d5f60812a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d';
const UPLOAD_TOKEN = 'upl_Xq3v9Lw2Rk7Tn5Bm8Hc4Jd6Fg1Ys0Pa2Ze4Ui6Oq8Wt';

const state = z.enum(['pending', 'stored', 'skipped', 'failed', 'infected']);

/** A file as the timeline lists it on its event. */
export const attachmentSummary = z
  .object({
    id: z.uuid().meta({ examples: [ATTACHMENT_ID] }),
    name: z.string().meta({ examples: ['invoice-10482.pdf'] }),
    content_type: z.string().meta({ description: 'Sniffed from the bytes, never taken from the sender.', examples: ['application/pdf'] }),
    size: z.number().int().min(0).meta({ examples: [48213] }),
    sha256: z.string().nullable().meta({ examples: [SHA256] }),
    state: state.meta({ description: 'Only a stored file can be downloaded.', examples: ['stored'] }),
  })
  .meta({ id: 'AttachmentSummary' });

export const attachmentView = attachmentSummary
  .extend({
    reason: z.string().nullable().meta({ description: 'Why a file is skipped (too large, with the limit), failed (the error) or infected (the signature).', examples: [null] }),
    content_id: z.string().nullable().meta({ description: "An email inline image's Content-ID (the HTML body's cid: links).", examples: [null] }),
    created_at: z.string().meta({ examples: ['2025-03-14T09:41:53.412Z'] }),
  })
  .meta({ id: 'Attachment' });

export const attachmentDetail = attachmentView
  .extend({
    ticket_id: z.uuid().nullable().meta({ description: 'The ticket it is attached to (null: an upload not yet used).', examples: ['595be628-f6f2-4262-9c10-6389c6c4a5b8'] }),
    event_id: z.uuid().nullable().meta({ description: 'The timeline event (reply, note, inbound message) it came with.', examples: ['9e2f4a18-3b6c-4d07-a5e9-1c8b7d2f0a64'] }),
    internal: z.boolean().meta({ description: "A note's file: never shown to the customer.", examples: [false] }),
  })
  .meta({ id: 'AttachmentDetail' });

export const uploaded = z
  .object({
    upload_token: z.string().meta({ description: 'Name it in a reply or note (`attachments: [token]`) within the hour. Shown in this answer only.', examples: [UPLOAD_TOKEN] }),
    attachment: attachmentView,
    expires_at: z.string().meta({ description: 'An upload no reply or note used by then is removed.', examples: ['2025-03-14T10:41:53.412Z'] }),
  })
  .meta({ id: 'Upload' });

export const attachmentIdParams = z.object({ attachment_id: z.uuid().meta({ examples: [ATTACHMENT_ID] }) });

/** What a reply or note may carry: upload tokens from POST /v1/uploads. */
export const MAX_ATTACHMENTS = 20;
export const attachmentTokens = z
  .array(z.string().min(1).max(200))
  .max(MAX_ATTACHMENTS)
  .meta({ description: `Up to ${MAX_ATTACHMENTS} upload tokens (POST /v1/uploads) of the caller's, each used within its hour and once.`, examples: [[UPLOAD_TOKEN]] });

/** The multipart form POST /v1/uploads reads (OpenAPI only: the body is streamed, not parsed by a schema). */
export const UPLOAD_FORM = {
  type: 'object',
  required: ['file'],
  properties: {
    file: { type: 'string', format: 'binary', description: 'The file. Its name (the part\'s filename) is sanitised; its type is sniffed from the bytes.' },
  },
};

export const EXAMPLE_ATTACHMENT = {
  id: ATTACHMENT_ID,
  name: 'invoice-10482.pdf',
  content_type: 'application/pdf',
  size: 48213,
  sha256: SHA256,
  state: 'stored',
  reason: null,
  content_id: null,
  created_at: '2025-03-14T09:41:53.412Z',
};
