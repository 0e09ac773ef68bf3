import { defineOperation } from '../../define-operation';
import { createViewBody, savedView, savedViewList, viewIdParams } from './schemas';

export const savedViewOperations = [
  defineOperation({
    id: 'create_saved_view',
    method: 'post',
    path: '/v1/saved-views',
    summary: 'Save a queue view: ticket filters with a name',
    description: 'filters may hold only keys GET /v1/tickets understands, with values it accepts: 422 filter_unknown / filter_invalid otherwise, and nothing is stored. shared: true makes the view visible to the whole workspace.',
    access: { floor: 'editor', tag: 'helpdesk-ops', action: 'write' },
    body: createViewBody,
    response: { status: 201, description: 'The saved view', schema: savedView },
    errors: ['filter_unknown', 'filter_invalid'],
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.savedViews.create(principal, body) }),
  }),
  defineOperation({
    id: 'list_saved_views',
    method: 'get',
    path: '/v1/saved-views',
    summary: 'The caller\'s own views and the shared ones',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'read' },
    response: { status: 200, description: 'Saved views', schema: savedViewList },
    handler: async ({ principal }, s) => ({ body: await s.savedViews.list(principal) }),
  }),
  defineOperation({
    id: 'delete_saved_view',
    method: 'delete',
    path: '/v1/saved-views/{view_id}',
    summary: 'Delete a view (its owner, or an admin for a shared view)',
    access: { floor: 'editor', tag: 'helpdesk-ops', action: 'write' },
    params: viewIdParams,
    response: { status: 204, description: 'Deleted' },
    handler: async ({ principal, params }, s) => {
      await s.savedViews.remove(principal, params.view_id);
      return { status: 204 };
    },
  }),
];
