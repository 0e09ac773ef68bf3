import type { JobData } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

/** Retention (issue 38): the sweep, and each workspace's run erasing its due conversations in batches. */
export const retentionProcessors = (services: WorkerServices) => {
  /** Background work: it makes way, bounded, while live intake saturates the host. */
  const bulk = services.intakePriority.background.run;
  return {
    'retention.sweep': () => bulk(() => services.retention.sweep()),
    'retention.run': (data: JobData<'retention.run'>) => bulk(() => services.retention.run(data.tenant_id, { ...(data.continued ? { continued: data.continued } : {}) })),
  };
};
