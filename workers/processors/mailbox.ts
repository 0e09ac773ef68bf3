import type { JobData, JobRun } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

export const mailboxProcessors = (services: WorkerServices) => ({
  // When the refresh was asked for: a sweep's job says when the sweep saw the mailbox due (database time, the
  // clock last_checked_at is written with); an admin's refresh is asked for when its job is created.
  'mailbox.refresh': (data: JobData<'mailbox.refresh'>, run: JobRun) =>
    services.mailbox.check(data.tenant_id, false, data.due_as_of ? new Date(data.due_as_of) : run.requestedAt),
  'mailbox.poll': (data: JobData<'mailbox.poll'>) => services.mailboxPolling.poll(data.tenant_id),
  'mailbox.sweep': () => services.mailbox.sweep(),
});
