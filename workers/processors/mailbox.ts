import type { Job } from 'bullmq';
import type { JobData } from '../../src/queue/jobs';
import type { Services } from '../../src/services';

export const mailboxProcessors = (services: Services) => ({
  // job.timestamp is when the refresh was asked for (BullMQ's creation time of the job).
  'mailbox.refresh': (data: JobData<'mailbox.refresh'>, job?: Job) => services.mailbox.check(data.tenant_id, false, job ? new Date(job.timestamp) : undefined),
  'mailbox.poll': (data: JobData<'mailbox.poll'>) => services.mailbox.poll(data.tenant_id),
  'mailbox.sweep': () => services.mailbox.sweep(),
  'outbound.send': (data: JobData<'outbound.send'>, job?: Job) => services.mailbox.send(data.tenant_id, data.event_id, (job?.attemptsMade ?? 0) + 1),
});
