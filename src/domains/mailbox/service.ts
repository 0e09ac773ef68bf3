import type { Logger } from 'pino';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { Principal } from '../identity/principal';
import type { QueueHub } from '../../queue/hub';
import type { ChannelService } from '../channels/service';
import type { IngestWorker } from '../ingest/worker';
import type { InboundFiles } from '../inbound-files/service';
import type { EventSink } from '../events/types';
import { createMailboxHealth } from './health';
import { createMailboxOAuth } from './oauth';
import { createMailboxPolling } from './polling';
import { createMailProviders } from './providers';
import { createMailboxSending } from './sending';
import * as store from './store';
import { createMailboxTokens } from './tokens';

export type { MailboxStatus } from './health';

/**
 * The connected mailbox: OAuth with Google or Microsoft, tokens sealed at rest, and health checks that say
 * what works and what an admin should do about what does not. Reads come from stored state only; only a
 * refresh (the `mailbox.refresh` job, on demand or on schedule) asks the provider.
 *
 * This file only composes the parts (issue 35 split a 500-line closure by concern): `oauth.ts` (connecting),
 * `tokens.ts` (sealing, refreshing and lending the tokens, the one place that opens them), `health.ts` (checks,
 * the status read, `mailbox.health_changed`), `polling.ts` (inbox mail into ingest) and `sending.ts` (replies).
 * What it returns is the same object it always was, so routes, workers and the outbound pipeline did not change.
 */
export function createMailboxService(deps: {
  db: Db;
  config: ConfigSection<'mailbox' | 'secrets' | 'http'>;
  queues: QueueHub;
  logger: Logger;
  channels: ChannelService;
  /** Where mailbox.health_changed goes (issue 19). */
  events?: EventSink;
  /** Inbound files (issue 34): caps a polled message's files as the ingest edge caps a pushed one's. */
  files?: Pick<InboundFiles, 'prepare'>;
}) {
  const { db, config, queues } = deps;
  // One set of provider clients for every part: the same configured base URLs and timeouts.
  const providers = createMailProviders(config);
  const tokens = createMailboxTokens({ db, config, providers });
  const health = createMailboxHealth({ db, config, logger: deps.logger, providers, tokens, events: deps.events });
  const oauth = createMailboxOAuth({ db, config, providers, tokens, channels: deps.channels, health });
  const sending = createMailboxSending({ db, config, providers, tokens });

  return {
    start: oauth.start,
    complete: oauth.complete,

    status: (actor: Principal) => health.read(actor.tenantId),

    /** Runs the check on the worker and waits for it; on a slow provider the stored status is returned. */
    async refresh(actor: Principal) {
      if (await store.getMailbox(db, actor.tenantId)) {
        await queues.enqueueAndAwait('mailbox.refresh', { tenant_id: actor.tenantId }, { waitMs: config.JOB_WAIT_MS });
      }
      return health.read(actor.tenantId);
    },

    /**
     * The `mailbox.poll` job's poller, made by the workers with their ingest writer (src/services/worker.ts): the
     * API builds no ingest writer, so it has no poller at all rather than one that cannot work.
     */
    poller: (ingest: Pick<IngestWorker, 'processBatch'>) => createMailboxPolling({ db, logger: deps.logger, providers, tokens, ingest, files: deps.files }),
    sendReply: sending.sendReply,
    sender: sending.sender,
    /** Inbound files' `MailboxTokens`: a token for fetching a polled message's files (see `tokens.ts`). */
    tokenForFiles: tokens.forFiles,

    /** The `mailbox.refresh` job. */
    check: health.check,

    /** The scheduled sweep: one refresh per mailbox due, deduplicated by job id so none is queued twice. */
    async sweep() {
      await store.crossTenantPruneOAuthStates(db, new Date(Date.now() - 24 * 3600 * 1000));
      // Each job carries when the sweep saw the mailbox due: a check that finished after that already answered
      // it. The job's own creation time would not do: a check finishing between this read and the enqueue
      // (its job gone, so the job id no longer dedupes) made the provider be asked twice.
      const due = await store.crossTenantDueForRefresh(db, config.MAILBOX_REFRESH_SECONDS);
      for (const d of due) await queues.enqueue('mailbox.refresh', { tenant_id: d.tenant_id, due_as_of: d.as_of.toISOString() });
      const polls = await store.crossTenantDueForPoll(db, config.MAILBOX_POLL_SECONDS);
      for (const tenantId of polls) await queues.enqueue('mailbox.poll', { tenant_id: tenantId });
      return { refreshes: due.length, polls: polls.length };
    },
  };
}

export type MailboxService = ReturnType<typeof createMailboxService>;
