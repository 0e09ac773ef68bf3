import type { ConfigSection } from '../../src/config';
import type { JobData } from '../../src/queue/jobs';
import type { Services } from '../../src/services';

export const maintenanceProcessors = (services: Services, config: ConfigSection<'workers' | 'events'>) => ({
  'audit.prune': (data: JobData<'audit.prune'>) => services.audit.prune(data.retention_days ?? config.AUDIT_RETENTION_DAYS),
  'sla.check': async (data: JobData<'sla.check'>) => ({ breached: await services.tickets.checkSla(data.tenant_id, data.ticket_id) }),
  'sla.sweep': () => services.tickets.sweepSla(),
  'events.prune': (data: JobData<'events.prune'>) => services.events.prune(data.retention_days ?? config.EVENT_RETENTION_DAYS),
  'idempotency.prune': async () => ({ pruned: await services.idempotency.pruneExpired() }),
  'macros.trigger': (data: JobData<'macros.trigger'>) => services.macros.runTriggered(data),
});
