import { roleAtLeast } from '../../domains/identity/roles';
import { scopesCover } from '../../domains/identity/scopes';
import type { Principal } from '../../domains/identity/principal';
import { insufficientRole, insufficientScope } from '../../lib/errors';
import { setLogTenant } from '../../lib/log-context';
import type { Operation } from '../operation';
import { PUBLIC_PRINCIPAL, type Exchange } from './context';

/** The floor and the scope: 403 insufficient_role, then 403 insufficient_scope. */
export function authorize(op: Pick<Operation, 'access'>, principal: Principal): void {
  if (op.access === 'public') return;
  if (!roleAtLeast(principal.role, op.access.floor)) throw insufficientRole(op.access.floor);
  if (principal.scopes && !scopesCover(principal.scopes, op.access.tag, op.access.action)) {
    throw insufficientScope(`${op.access.tag}:${op.access.action}`);
  }
}

/**
 * Stage 1, the guard: 401 (the credential, throttled per address) → 404 (membership, inside authenticate) → 403
 * insufficient_role → 403 insufficient_scope. Public operations consult no credential.
 */
export async function guard(x: Omit<Exchange, 'principal'>): Promise<Principal> {
  const { op, services, req, res } = x;
  if (op.access === 'public') return PUBLIC_PRINCIPAL;
  const principal = await services.limits.authFailures.authenticate(req.ip, req.headers.authorization, services.identity.authenticate);
  res.locals.tenantId = principal.tenantId;
  setLogTenant(principal.tenantId);
  authorize(op, principal);
  return principal;
}
