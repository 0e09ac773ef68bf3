import type { ConfigSection } from '../../src/config';
import type { JobData } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

/** Business hours (issue 37): iCal holiday feeds, and open tickets' due times recomputed after a schedule change. */
export const scheduleProcessors = (services: WorkerServices, config: ConfigSection<'schedules'>) => {
  /** The sweep and the recompute are background work: they make way, bounded, while live intake saturates the host. */
  const bulk = services.intakePriority.background.run;
  return {
    'schedules.ical_sweep': () => bulk(() => services.scheduleFeeds.sweep()),
    'schedules.ical_refresh': (data: JobData<'schedules.ical_refresh'>) => services.scheduleFeeds.refresh(data),
    'schedules.recompute': (data: JobData<'schedules.recompute'>) => bulk(() => services.tickets.recomputeSchedule(data.tenant_id, data.schedule_id, { batch: config.SCHEDULE_RECOMPUTE_BATCH })),
  };
};
