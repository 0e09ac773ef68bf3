import { z } from 'zod';
import { rawFilterObject } from '../tickets/filters';

export const viewIdParams = z.object({ view_id: z.uuid() });

export const createViewBody = z.strictObject({
  name: z.string().trim().min(1).max(120),
  filters: rawFilterObject.meta({ description: 'Keys and values of GET /v1/tickets filters; anything else is refused (422).' }),
  shared: z.boolean().default(false),
});

export const savedView = z.object({
  id: z.uuid(),
  name: z.string(),
  filters: z.record(z.string(), z.string()),
  shared: z.boolean(),
  owner_user_id: z.uuid(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const savedViewList = z.object({ saved_views: z.array(savedView) });
