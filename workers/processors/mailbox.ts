import type { Job } from 'bullmq';
import type { JobData } from '../../src/queue/jobs';
import type { Services } from '../../src/services';

export const mailboxProcessors = (services: Services) => ({
  'mailbox.refresh': async (data: JobData<'mailbox.refresh'>) => {
    await services.mailbox.check(data.tenant_id);
    return { checked: true };
  },
  'mailbox.poll': (data: JobData<'mailbox.poll'>) => services.mailbox.poll(data.tenant_id),
  'mailbox.sweep': () => services.mailbox.sweep(),
  'outbound.send': (data: JobData<'outbound.send'>, job?: Job) => services.mailbox.send(data.tenant_id, data.event_id, (job?.attemptsMade ?? 0) + 1),
});
