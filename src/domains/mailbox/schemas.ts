import { z } from 'zod';
import { MAIL_PROVIDERS } from './providers';

const STATE = 'Xq3vJ8r2Lk9pTz4mWb7nHc1sYd6fGa0eRu5iOt2wQe8';
const SCOPES = ['openid', 'email', 'https://www.googleapis.com/auth/gmail.readonly', 'https://www.googleapis.com/auth/gmail.send'];
const at = (t: string) => z.string().meta({ examples: [`2025-03-14T${t}.000Z`] });
/** A time that may not have happened yet: null until it has, never "" (a `date-time` must be one; issue 35). */
const atOrNull = (t: string, description: string) => z.string().nullable().meta({ description, examples: [`2025-03-14T${t}.000Z`] });
const checked = '2025-03-14T09:25:00.000Z';
const CHECKS = [
  { check: 'oauth_token', status: 'ok', detail: 'The google grant works.', remediation: 'None.', last_checked_at: checked },
  { check: 'scopes', status: 'ok', detail: `Granted: ${SCOPES.join(' ')}.`, remediation: 'None.', last_checked_at: checked },
  { check: 'send_permission', status: 'ok', detail: 'Replies can be sent through this mailbox.', remediation: 'None.', last_checked_at: checked },
  { check: 'inbound_polling', status: 'ok', detail: 'New mail is polled.', remediation: 'None.', last_checked_at: checked },
  { check: 'daily_send_quota', status: 'ok', detail: '37 of 500 replies sent today (UTC).', remediation: 'None.', last_checked_at: checked },
];

/** Another provider is 404 (the service checks); the document lists the known ones (`enum`). */
export const mailProviderParams = z.object({ mailprovider: z.string().min(1).max(32).meta({ enum: [...MAIL_PROVIDERS], examples: ['google'] } as never) });

export const completeOauthBody = z.strictObject({
  code: z.string().min(1).max(4096).meta({ examples: ['4/0AeanS0bT8xK2vQ9mZ7pL3wR6yN1cF5hJ4dG8sA2eU0iO'] }),
  state: z.string().min(1).max(512).meta({ examples: [STATE] }),
});

export const oauthStart = z.object({
  authorize_url: z.string().meta({
    examples: [
      `https://accounts.google.com/o/oauth2/v2/auth?client_id=41230-helpdesk.apps.googleusercontent.com&redirect_uri=https%3A%2F%2Fapi.helpdesk.example%2Foauth%2Fgoogle%2Fcallback&response_type=code&scope=${encodeURIComponent(SCOPES.join(' '))}&state=${STATE}&access_type=offline&prompt=consent&include_granted_scopes=true`,
    ],
  }),
  state: z.string().meta({ examples: [STATE] }),
  expires_at: at('09:36:53'),
});

const check = z.object({
  check: z.enum(['oauth_token', 'scopes', 'send_permission', 'inbound_polling', 'daily_send_quota']),
  status: z.enum(['ok', 'warning', 'failing', 'unknown']),
  detail: z.string(),
  remediation: z.string(),
  last_checked_at: z.string(),
});
const checks = z.array(check).meta({ examples: [CHECKS] });

/**
 * Every field is always present. Empty strings, zero and false stand for "nothing yet", except timestamps:
 * those are null until the moment has happened (a generated client types them `string | null`).
 */
export const mailboxStatus = z.object({
  connected: z.boolean(),
  provider: z.enum(['google', 'microsoft']).optional(),
  email_address: z.string().meta({ examples: ['support@northwind.example'] }),
  scopes: z.array(z.string()).meta({ examples: [SCOPES] }),
  sendable: z.boolean().meta({ examples: [true] }),
  polling: z.boolean().meta({ examples: [true] }),
  inbound_cursor_set: z.boolean().meta({ examples: [true] }),
  connected_at: atOrNull('09:12:40', 'When the mailbox was connected; null with nothing connected.'),
  healthy_at: atOrNull('09:25:00', 'When every check last passed; null until they have.'),
  last_polled_at: atOrNull('09:26:10', 'When new mail was last polled; null until the first poll.'),
  sent_today: z.number().int().meta({ examples: [37] }),
  checks,
}).meta({ id: 'MailboxStatus' });
