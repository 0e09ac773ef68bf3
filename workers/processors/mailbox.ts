import type { JobData } from '../../src/queue/jobs';
import type { Services } from '../../src/services';

export const mailboxProcessors = (services: Services) => ({
  'mailbox.refresh': async (data: JobData<'mailbox.refresh'>) => {
    await services.mailbox.check(data.tenant_id);
    return { checked: true };
  },
  'mailbox.sweep': () => services.mailbox.sweep(),
});
