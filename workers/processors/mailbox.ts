import type { JobData, JobRun } from '../../src/queue/jobs';
import type { Services } from '../../src/services';

export const mailboxProcessors = (services: Services) => ({
  // requestedAt is when the refresh was asked for (BullMQ's creation time of the job).
  'mailbox.refresh': (data: JobData<'mailbox.refresh'>, run: JobRun) => services.mailbox.check(data.tenant_id, false, run.requestedAt),
  'mailbox.poll': (data: JobData<'mailbox.poll'>) => services.mailbox.poll(data.tenant_id),
  'mailbox.sweep': () => services.mailbox.sweep(),
  'outbound.send': (data: JobData<'outbound.send'>, run: JobRun) => services.mailbox.send(data.tenant_id, data.event_id, run.attempt),
});
