import { agentOperations } from './domains/agents/routes';
import { apiKeyOperations } from './domains/api-keys/routes';
import { auditOperations } from './domains/audit/routes';
import { memberOperations } from './domains/members/routes';
import { customerOperations } from './domains/customers/routes';
import { customerExportOperations } from './domains/customers/export-routes';
import { privacyOperations } from './domains/privacy/routes';
import { slaPolicyOperations } from './domains/sla/routes';
import { scheduleOperations } from './domains/schedules/routes';
import { ticketOperations } from './domains/tickets/routes';
import { macroOperations } from './domains/macros/routes';
import { notificationOperations } from './domains/notifications/routes';
import { savedViewOperations } from './domains/saved-views/routes';
import { teamOperations } from './domains/teams/routes';
import { channelOperations } from './domains/channels/routes';
import { mailboxOperations } from './domains/mailbox/routes';
import { providerHookOperations } from './domains/provider-hooks/routes';
import { outboundOperations } from './domains/outbound/routes';
import { webhookOperations } from './domains/webhooks/routes';
import { rollupOperations } from './domains/rollups/routes';
import { reportOperations } from './domains/reports/routes';
import { workOperations } from './domains/work/routes';
import { workspaceOperations } from './domains/workspaces/routes';
import { retentionOperations } from './domains/retention/routes';
import { helpCentreOperations } from './domains/help-centre/routes';
import { ingestOperations } from './domains/ingest/routes';
import { eventOperations } from './domains/events/routes';
import { webhookEndpointOperations } from './domains/webhook-endpoints/routes';
import { webChatOperations } from './domains/web-chat/routes';
import { fileOperations } from './domains/files/routes';
import type { Operation } from './http/operation';
import type { ApiServices } from './services/api';

/** Every operation of the API, assembled from the domains and checked once at start-up. */
const ALL: Operation<ApiServices>[] = [
  ...apiKeyOperations,
  ...auditOperations,
  ...memberOperations,
  ...agentOperations,
  ...customerOperations,
  ...customerExportOperations,
  ...privacyOperations,
  ...ticketOperations,
  ...slaPolicyOperations,
  ...scheduleOperations,
  ...teamOperations,
  ...savedViewOperations,
  ...macroOperations,
  ...notificationOperations,
  ...channelOperations,
  ...mailboxOperations,
  ...providerHookOperations,
  ...outboundOperations,
  ...webhookOperations,
  ...workOperations,
  ...rollupOperations,
  ...reportOperations,
  ...workspaceOperations,
  ...retentionOperations,
  ...helpCentreOperations,
  ...ingestOperations,
  ...eventOperations,
  ...webhookEndpointOperations,
  ...webChatOperations,
  ...fileOperations,
];

export function buildOperationTable(rows: Operation<ApiServices>[] = ALL): Operation<ApiServices>[] {
  const ids = new Set<string>();
  const routes = new Set<string>();
  for (const op of rows) {
    const route = `${op.method.toUpperCase()} ${op.path.replace(/\{[^{}]+\}/g, '{}')}`;
    if (ids.has(op.id)) throw new Error(`operation table: duplicate id ${op.id}`);
    if (routes.has(route)) throw new Error(`operation table: two operations answer ${route}`);
    if (!op.path.startsWith('/v1/')) throw new Error(`operation table: ${op.id} is outside /v1`);
    const named = [...op.path.matchAll(/\{([^{}]+)\}/g)].map((m) => m[1]);
    const declared = op.params && 'shape' in op.params ? Object.keys((op.params as { shape: object }).shape) : [];
    if (named.join() !== declared.join()) throw new Error(`operation table: ${op.id} path params ${named} != schema ${declared}`);
    ids.add(op.id);
    routes.add(route);
  }
  return rows;
}
