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
