import { operationsFor } from './http/operation';
import type { Services } from './services';

/** A row of the operation table, its handler handed this app's service container. */
export const defineOperation = operationsFor<Services>();
