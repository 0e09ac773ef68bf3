import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * What every log line written while serving a request or running a job says about where it came from: the
 * request id or the job (id and name), and the workspace once it is known. Carried by AsyncLocalStorage, so
 * a service logging deep inside a call needs no logger handed down; the logger's mixin adds it to each line.
 */
export interface LogContext {
  request_id?: string;
  job_id?: string;
  job?: string;
  tenant_id?: string;
}

const storage = new AsyncLocalStorage<LogContext>();

export const logContext = (): LogContext | undefined => storage.getStore();

export const withLogContext = <T>(context: LogContext, fn: () => T): T => storage.run({ ...context }, fn);

/** Names the workspace for the rest of the request or job (known only after authentication or parsing). */
export function setLogTenant(tenantId: string | undefined): void {
  const store = storage.getStore();
  if (store && tenantId) store.tenant_id = tenantId;
}
