import { defineOperation } from '../../define-operation';
import { patchTenantBody, tenantView } from './schemas';

export const workspaceOperations = [
  defineOperation({
    id: 'get_my_tenant',
    method: 'get',
    path: '/v1/tenants/me',
    summary: 'The workspace\'s settings; provider keys only as whether each is set',
    access: { floor: 'viewer', tag: 'tenants', action: 'read' },
    response: { status: 200, description: 'The workspace', schema: tenantView },
    versioned: true,
    handler: async ({ principal }, s) => {
      const t = await s.settings.get(principal);
      return { body: t, version: t.version };
    },
  }),
  defineOperation({
    id: 'patch_my_tenant',
    method: 'patch',
    path: '/v1/tenants/me',
    summary: 'Change the settings sent (each written on its own; onboarding merged, a key set to null removed; a provider key "" deletes it)',
    description: 'Caps are non-negative amounts with at most 2 decimal places, or null for no cap; the daily cap may not exceed the monthly cap (422 cap_order). Provider keys are stored encrypted and never returned.',
    access: { floor: 'admin', tag: 'tenants', action: 'write' },
    body: patchTenantBody,
    response: { status: 200, description: 'The workspace as it now stands', schema: tenantView },
    errors: ['cap_order', 'precondition_failed'],
    versioned: true,
    handler: async ({ principal, body, ifMatch }, s) => {
      const t = await s.settings.patch(principal, body, ifMatch);
      return { body: t, version: t.version };
    },
  }),
];
