import type { Logger } from 'pino';
import type { Config } from './config';
import type { Db } from './db';
import { createAgentService } from './domains/agents/service';
import { createApiKeyService } from './domains/api-keys/service';
import { createAuditService } from './domains/audit/service';
import { createIdentityService } from './domains/identity/service';
import { createMemberService } from './domains/members/service';
import { createWorkspaceService } from './domains/workspaces/service';
import { createCustomerService } from './domains/customers/service';
import { createTicketService } from './domains/tickets/service';
import { createSlaPolicyService } from './domains/sla/service';
import type { QueueHub } from './queue/hub';
import { createNotificationService } from './domains/notifications/service';
import { createTeamService } from './domains/teams/service';
import { createSavedViewService } from './domains/saved-views/service';
import { createMacroService, createMacroTriggerSink } from './domains/macros/service';

/** The service container: each factory gets only the dependencies it needs. */
export function createServices(deps: { db: Db; config: Config; queues: QueueHub; logger: Logger }) {
  const { db, config, queues, logger } = deps;
  const audit = createAuditService({ db });
  const apiKeys = createApiKeyService({ db, config, audit });
  const customers = createCustomerService({ db });
  const notifications = createNotificationService({ db });
  const tickets = createTicketService({ db, customers, notifications, queues, logger, triggers: createMacroTriggerSink({ db, queues }) });
  return {
    identity: createIdentityService({ db, config }),
    audit,
    apiKeys,
    members: createMemberService({ db, audit, apiKeys }),
    agents: createAgentService({ db, audit }),
    workspaces: createWorkspaceService({ db, apiKeys, audit }),
    customers,
    notifications,
    tickets,
    teams: createTeamService({ db, config, tickets }),
    savedViews: createSavedViewService({ db }),
    macros: createMacroService({ db, tickets }),
    slaPolicies: createSlaPolicyService({ db }),
  };
}

export type Services = ReturnType<typeof createServices>;
