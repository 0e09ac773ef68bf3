/**
 * The macros tests' views of tickets and macros, and request helpers bound to a test context.
 */
import type { Job } from 'bullmq';
import { sql } from 'kysely';
import { newId } from '../../src/lib/ids';
import { type TestContext } from './context';
import { bearer, type Workspace } from './factories';
import type { TicketEvent } from './ingest';
import { getTicket, patchTicket } from './tickets';
import { eventually } from './wait';

/** A timeline event as the ticket detail shows it. */
export type Ev = TicketEvent;

export interface TicketView {
  id: string;
  status: string;
  priority: string;
  tags: string[];
  team_id?: string;
  assignee_id?: string;
  updated_at: string;
  legal_next_states: string[];
  events: Ev[];
}

export interface MacroView {
  id: string;
  name: string;
  description: string;
  actions: Record<string, unknown>[];
  enabled: boolean;
  trigger: { event: string; conditions: Record<string, string> } | null;
  created_at: string;
  updated_at: string;
  version: string;
}

export type TriggerEvent = 'ticket.created' | 'ticket.updated' | 'ticket.reopened';

export const MACRO_FIELDS = ['id', 'name', 'description', 'actions', 'enabled', 'trigger', 'created_at', 'updated_at', 'version'];
export const ms = (iso: string) => new Date(iso).getTime();

export const applied = (t: TicketView, macroId: string) => t.events.filter((e) => e.kind === 'macro_applied' && e.meta.macro_id === macroId);
export const skippedEvents = (t: TicketView, macroId: string) => t.events.filter((e) => e.kind === 'macro_action_skipped' && e.meta.macro_id === macroId);
export const createdEventId = (t: TicketView) => t.events.find((e) => e.kind === 'ticket_created')!.id;

/** Helpers bound to one test context. */
export function helpers(get: () => TestContext) {
  const h = {
    postMacro: (token: string, body: Record<string, unknown>) => get().http.post('/v1/macros').set(bearer(token)).send(body),
    patchMacro: (token: string, id: string, body: Record<string, unknown>) => get().http.patch(`/v1/macros/${id}`).set(bearer(token)).send(body),
    apply: (token: string, ticketId: string, macroId: string) => get().http.post(`/v1/tickets/${ticketId}/macros/${macroId}/apply`).set(bearer(token)).send(),

    async macro(ws: Workspace, body: Record<string, unknown>, token = ws.ownerKey): Promise<MacroView> {
      const res = await h.postMacro(token, { name: `Macro ${Math.random().toString(36).slice(2, 8)}`, ...body });
      if (res.status !== 201) throw new Error(`create macro: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body as MacroView;
    },
    async list(token: string): Promise<MacroView[]> {
      const res = await get().http.get('/v1/macros').set(bearer(token));
      if (res.status !== 200) throw new Error(`list macros: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.macros as MacroView[];
    },
    ticket: (ws: Workspace, id: string) => getTicket<TicketView>(get(), ws, id),
    patchTicket: (ws: Workspace, id: string, body: Record<string, unknown>) => patchTicket<TicketView>(get(), ws, id, body),
    async makeTeam(ws: Workspace, name = 'Tier 2'): Promise<string> {
      const id = newId();
      await get().db.insertInto('teams').values({ id, tenant_id: ws.tenantId, name }).execute();
      return id;
    },
    async macroCount(tenantId: string): Promise<number> {
      const r = await sql<{ n: number }>`select count(*)::int as n from macros where tenant_id = ${tenantId}`.execute(get().db);
      return r.rows[0]!.n;
    },
    async runs(macroId: string, eventId?: string): Promise<number> {
      let q = get().db.selectFrom('macro_runs').select(sql<number>`count(*)::int`.as('n')).where('macro_id', '=', macroId);
      if (eventId) q = q.where('event_id', '=', eventId);
      return (await q.executeTakeFirstOrThrow()).n;
    },
    /** Every macros.trigger job (any state) in the maintenance queue for a ticket. */
    async triggerJobs(ticketId: string): Promise<Job[]> {
      // Trigger jobs are enqueued after the answer (services.later): wait for that work before looking.
      await get().services.later.settle();
      const q = get().runtime.queues.queue('maintenance');
      const jobs = await q.getJobs(['wait', 'waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed']);
      const seen = new Set<string>();
      return jobs.filter((j) => {
        if (!j || j.name !== 'macros.trigger' || (j.data as { ticket_id?: string }).ticket_id !== ticketId || seen.has(j.id!)) return false;
        seen.add(j.id!);
        return true;
      });
    },
    /** Waits until at least `min` trigger jobs exist for the ticket and all of them have completed. */
    async settled(ticketId: string, min: number): Promise<Job[]> {
      return eventually(
        async () => {
          const jobs = await h.triggerJobs(ticketId);
          for (const j of jobs) {
            if (j.failedReason) throw new Error(`macros.trigger job ${j.id} failed: ${j.failedReason}`);
          }
          if (jobs.length < min) return undefined;
          const states = await Promise.all(jobs.map((j) => j.getState()));
          // Re-read once all are complete: the job objects above may predate their return values.
          return states.every((s) => s === 'completed') ? h.triggerJobs(ticketId) : undefined;
        },
        10_000,
        `${min} settled macros.trigger job(s) for ticket ${ticketId}`,
      );
    },
    /** Polls GET ticket until the macro has applied `count` times (≤ 10 s). */
    async waitApplied(ws: Workspace, ticketId: string, macroId: string, count = 1): Promise<TicketView> {
      return eventually(
        async () => {
          const t = await h.ticket(ws, ticketId);
          return applied(t, macroId).length >= count ? t : undefined;
        },
        10_000,
        `macro ${macroId} applied ${count}× on ticket ${ticketId}`,
      );
    },
  };
  return h;
}

