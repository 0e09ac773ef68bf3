import type { Request, Response } from 'express';
import type { Principal } from '../../domains/identity/principal';
import type { IdempotencyService } from '../../domains/idempotency/service';
import type { ReadRouting } from '../../db/reads';
import type { Limits } from '../../limits';
import type { Operation } from '../operation';

/** What the router itself asks of the service container: authentication, budgets, idempotency, read routing. */
export interface RouterServices {
  /** The budgets (src/limits/): failed authentication, the API's caller and workspace, intake refusals, public reads. */
  limits: {
    authFailures: Pick<Limits['authFailures'], 'authenticate'>;
    api: Pick<Limits['api'], 'take'>;
    refusals: Pick<Limits['refusals'], 'charge'>;
    publicReads: Pick<Limits['publicReads'], 'take'>;
  };
  identity: { authenticate(authorization: string | undefined): Promise<Principal> };
  idempotency: Pick<IdempotencyService, 'check' | 'fingerprint' | 'start' | 'finish' | 'release' | 'maxStoredBytes'>;
  reads: Pick<ReadRouting, 'wrote'>;
}

/** One request on its way through the stages (src/http/router.ts): what each stage reads and adds. */
export interface Exchange<S extends RouterServices = RouterServices> {
  op: Operation<S>;
  services: S;
  req: Request;
  res: Response;
  /** Set by the guard; the public principal (which nothing may read) on public operations. */
  principal: Principal;
}

/** Handed to public operations, which must not read it: no credential was consulted. */
export const PUBLIC_PRINCIPAL: Principal = Object.freeze({
  kind: 'user',
  tenantId: '',
  userId: '',
  role: 'viewer',
  apiKeyId: null,
  scopes: [],
  agentIds: [],
}) as Principal;
