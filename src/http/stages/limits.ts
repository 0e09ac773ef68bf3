import type { Exchange } from './context';

/**
 * Stage 2, the budgets: the caller's and the workspace's, said on every authenticated answer (429 past either); a
 * public read marked `addressBudget` takes from its client address's budget instead.
 */
export async function chargeLimits(x: Exchange): Promise<void> {
  if (x.op.access === 'public') {
    if (x.op.addressBudget) await x.services.limits.publicReads.take(x.req.ip);
    return;
  }
  for (const [name, value] of Object.entries(await x.services.limits.api.take(x.principal))) x.res.setHeader(name, value);
}
