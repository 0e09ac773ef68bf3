import { z } from 'zod';
import { rawFilterObject } from '../tickets/filters';

const FILTERS = { status: 'open', priority: 'urgent', tag: 'billing' };
const at = z.string().meta({ examples: ['2025-03-10T14:02:31.000Z'] });

export const viewIdParams = z.object({ view_id: z.uuid() });

export const createViewBody = z.strictObject({
  name: z.string().trim().min(1).max(120).meta({ examples: ['Urgent billing'] }),
  filters: rawFilterObject.meta({ description: 'Keys and values of GET /v1/tickets filters; anything else is refused (422).', examples: [FILTERS] }),
  shared: z.boolean().default(false).meta({ examples: [true] }),
});

export const savedView = z.object({
  id: z.uuid().meta({ examples: ['51ee3349-7269-4d2c-8a79-ea7055ee54f4'] }),
  name: z.string().meta({ examples: ['Urgent billing'] }),
  filters: z.record(z.string(), z.string()).meta({ examples: [FILTERS] }),
  shared: z.boolean(),
  owner_user_id: z.uuid().meta({ examples: ['a169451c-8525-4352-b8ca-070dd449a1a5'] }),
  created_at: at,
  updated_at: at,
}).meta({ id: 'SavedView' });

export const savedViewList = z.object({ saved_views: z.array(savedView) });
