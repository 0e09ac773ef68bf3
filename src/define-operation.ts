import { operationsFor } from './http/operation';
import type { ApiServices } from './services/api';

/** A row of the operation table, its handler handed this app's service container. */
export const defineOperation = operationsFor<ApiServices>();
