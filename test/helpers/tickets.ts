import type { Executor } from '../../src/db';
import type { EventActor } from '../../src/domains/tickets/commands';
import type { TestContext } from './context';
import { bearer, type Workspace } from './factories';

let n = 0;

/** Creates a ticket through the API (customer by email) and returns its detail. */
export async function createTicket(ctx: TestContext, ws: Workspace, body: Record<string, unknown> = {}) {
  n += 1;
  const res = await ctx.http
    .post('/v1/tickets')
    .set(bearer(ws.ownerKey))
    .send({ subject: `Printer on fire ${n}`, description: 'It is on fire.', customer_email: `customer${n}@example.test`, ...body });
  if (res.status !== 201) throw new Error(`createTicket failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export async function setStatus(ctx: TestContext, ws: Workspace, id: string, status: string) {
  const res = await ctx.http.patch(`/v1/tickets/${id}`).set(bearer(ws.ownerKey)).send({ status });
  if (res.status !== 200) throw new Error(`setStatus ${status} failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A ticket's detail (200 or throws), typed as the caller reads it. */
export async function getTicket<T>(ctx: TestContext, ws: Workspace, id: string): Promise<T> {
  const res = await ctx.http.get(`/v1/tickets/${id}`).set(bearer(ws.ownerKey));
  if (res.status !== 200) throw new Error(`get ticket: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as T;
}

/** PATCHes a ticket as the owner (200 or throws) and returns its detail. */
export async function patchTicket<T>(ctx: TestContext, ws: Workspace, id: string, body: Record<string, unknown>): Promise<T> {
  const res = await ctx.http.patch(`/v1/tickets/${id}`).set(bearer(ws.ownerKey)).send(body);
  if (res.status !== 200) throw new Error(`patch ticket: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as T;
}

/** Sets the ticket pending as the system inside a transaction that then throws: the change must leave no trace. */
export async function changeRolledBack(ctx: TestContext, ws: Workspace, ticketId: string): Promise<void> {
  const system: EventActor = { actor_type: 'system', actor_user_id: null, actor_name: 'Test' };
  const commands = ctx.services.tickets.commands;
  await expect(
    ctx.db.transaction().execute(async (tx: Executor) => {
      const locked = await commands.lockForChange(tx, ws.tenantId, ticketId);
      await commands.applyChanges(tx, ws.tenantId, system, locked, { status: 'pending' });
      throw new Error('rolled back on purpose');
    }),
  ).rejects.toThrow('rolled back on purpose');
}
