import type { Exchange } from './context';

/** Stage 2, the budgets: the caller's and the workspace's, said on every authenticated answer (429 past either). */
export async function chargeLimits(x: Exchange): Promise<void> {
  if (x.op.access === 'public') return;
  for (const [name, value] of Object.entries(await x.services.limits.api.take(x.principal))) x.res.setHeader(name, value);
}
