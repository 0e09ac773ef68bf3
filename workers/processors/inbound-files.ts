import type { JobData } from '../../src/queue/jobs';
import type { Services } from '../../src/services';

/** Inbound files (issue 34): one message's files fetched and stored, and the sweep of what dead workers left. */
export const inboundFileProcessors = (services: Services) => ({
  'files.fetch': (data: JobData<'files.fetch'>) => services.inboundFiles.fetch(data),
  'files.inbound-sweep': () => services.inboundFiles.sweep(),
});
