import { z } from 'zod';
import { intParam } from '../../lib/params';

/** The longest retention a workspace may set (100 years), as the tenants table's CHECK says. */
export const RETENTION_DAYS_MAX = 36_500;

export const retentionPreviewQuery = z.strictObject({
  retention_days: intParam(1, RETENTION_DAYS_MAX)
    .optional()
    .meta({ examples: [365], description: 'Count for this retention instead of the workspace\'s setting (a proposal: nothing is written).' }),
});

const count = (example: number) => z.number().int().min(0).meta({ examples: [example] });

export const retentionPreview = z
  .object({
    retention_days: z.number().int().nullable().meta({ examples: [365], description: 'The workspace\'s setting; null when retention is off.' }),
    counted_days: z.number().int().nullable().meta({ examples: [365], description: 'The retention the counts are for: the proposal when sent, else the setting; null when off and none proposed (nothing is due).' }),
    cutoff: z.string().nullable().meta({ examples: ['2024-03-14T09:58:02.000Z'], description: 'Solved and closed tickets resolved before this instant are due.' }),
    due: z
      .object({
        tickets: count(1840),
        events: count(9215),
        attachments: count(312),
        bytes: count(48_213_377).meta({ description: 'Bytes of stored files the workspace\'s file usage would fall by.' }),
      })
      .meta({ description: 'What a retention run would erase if it ran now: tickets\' conversations, their messages and their files.' }),
    capped: z.boolean().meta({ examples: [false], description: 'A count stopped at 100,000 rows: at least that many are due.' }),
    last_run: z
      .object({
        at: z.string().meta({ examples: ['2025-03-14T09:45:00.000Z'] }),
        tickets: count(120),
        events: count(604),
        attachments: count(17),
        done: z.boolean().meta({ description: 'false: the run stopped at its time budget and a continuation was queued.' }),
      })
      .nullable()
      .meta({ description: 'The workspace\'s last retention run and what it erased; null when none is known.' }),
  })
  .meta({ id: 'RetentionPreview' });
