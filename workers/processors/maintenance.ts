import type { ConfigSection } from '../../src/config';
import type { JobData } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

export const maintenanceProcessors = (services: WorkerServices, config: ConfigSection<'workers' | 'events'>) => {
  /** Background work (prunes, the SLA sweep) makes way, bounded, while live intake saturates the host, then runs. */
  const bulk = services.intakePriority.background.run;
  return {
    'audit.prune': (data: JobData<'audit.prune'>) => bulk(() => services.audit.prune(data.retention_days ?? config.AUDIT_RETENTION_DAYS)),
    'sla.check': async (data: JobData<'sla.check'>) => ({ breached: await services.tickets.checkSla(data.tenant_id, data.ticket_id) }),
    'sla.sweep': () => bulk(() => services.tickets.sweepSla()),
    'events.prune': (data: JobData<'events.prune'>) => bulk(() => services.events.prune(data.retention_days ?? config.EVENT_RETENTION_DAYS)),
    'idempotency.prune': () => bulk(async () => ({ pruned: await services.idempotency.pruneExpired() })),
    'macros.trigger': (data: JobData<'macros.trigger'>) => services.macros.runTriggered(data),
    'rules.sweep': () => bulk(() => services.timeRules.sweep()),
    'rules.run': (data: JobData<'rules.run'>) => bulk(() => services.timeRules.run(data.tenant_id, data.macro_id)),
    'uploads.sweep': () => bulk(() => services.files.sweepUploads()),
    'files.orphans': () => bulk(() => services.files.sweepOrphans()),
  };
};
