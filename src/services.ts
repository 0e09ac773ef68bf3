import type { Config } from './config';
import type { Db } from './db';
import { createAgentService } from './domains/agents/service';
import { createApiKeyService } from './domains/api-keys/service';
import { createAuditService } from './domains/audit/service';
import { createIdentityService } from './domains/identity/service';
import { createMemberService } from './domains/members/service';
import { createWorkspaceService } from './domains/workspaces/service';

/** The service container: each factory gets only the dependencies it needs. */
export function createServices(deps: { db: Db; config: Config }) {
  const { db, config } = deps;
  const audit = createAuditService({ db });
  const apiKeys = createApiKeyService({ db, config, audit });
  return {
    identity: createIdentityService({ db, config }),
    audit,
    apiKeys,
    members: createMemberService({ db, audit, apiKeys }),
    agents: createAgentService({ db, audit }),
    workspaces: createWorkspaceService({ db, apiKeys, audit }),
  };
}

export type Services = ReturnType<typeof createServices>;
