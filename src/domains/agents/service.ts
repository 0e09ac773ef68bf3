import type { Db } from '../../db';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { AuditService } from '../audit/service';
import * as store from './store';

const present = (a: { id: string; name: string; created_at: Date }) => ({ id: a.id, name: a.name, created_at: iso(a.created_at) });

export function createAgentService(deps: { db: Db; audit: AuditService }) {
  const { db, audit } = deps;
  return {
    create: (actor: Principal, input: { name: string }) =>
      db.transaction().execute(async (tx) => {
        const row = await store.insertAgent(tx, actor.tenantId, { id: newId(), name: input.name });
        await audit.record(tx, actor, 'agent.created', { type: 'agent', id: row.id }, { name: row.name });
        return present(row);
      }),

    async list(actor: Principal) {
      return { agents: (await store.listAgents(db, actor.tenantId, actor.agentIds)).map(present) };
    },
  };
}

export type AgentService = ReturnType<typeof createAgentService>;
