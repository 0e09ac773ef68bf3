import { section } from '../config';
import { createAgentService } from '../domains/agents/service';
import { createApiKeyService } from '../domains/api-keys/service';
import { createArticleService } from '../domains/help-centre/articles';
import { createArticleSearchService } from '../domains/help-centre/search';
import { createHelpCentreService } from '../domains/help-centre/service';
import { createIdempotencyService } from '../domains/idempotency/service';
import { createIdentityService } from '../domains/identity/service';
import { createIngestGateway } from '../domains/ingest/edge';
import { createMemberService } from '../domains/members/service';
import { createProviderHooks } from '../domains/provider-hooks/service';
import { createSavedViewService } from '../domains/saved-views/service';
import { createScheduleService } from '../domains/schedules/service';
import { createSlaPolicyService } from '../domains/sla/service';
import { createTeamService } from '../domains/teams/service';
import { createWebChatService } from '../domains/web-chat/service';
import { createWebhookEndpointService } from '../domains/webhook-endpoints/service';
import { createWebhookEdge } from '../domains/webhooks/edge';
import { createWebhookService } from '../domains/webhooks/service';
import { createWorkService } from '../domains/work/service';
import { createWorkspaceService, createWorkspaceSettingsService } from '../domains/workspaces/service';
import { createIntakeLanes } from '../intake/priority';
import { createAfterAnswer } from '../lib/after-answer';
import { createLimits } from '../limits';
import type { ResultBus } from '../queue/results';
import { createSharedServices, type ProcessDeps } from './shared';

/**
 * The API process's container (src/app.ts mounts the operation table with it): the shared pieces, and what only
 * requests use: authentication and the router's budgets, idempotency, the intake edges (channel ingest, provider
 * webhooks, web chat, provider hooks) and the domains only routes call. It builds no job's engine: the ingest and
 * webhook writers, the webhook sender and the files queue's turns are the workers' (src/services/worker.ts).
 */
export function createApiServices(deps: ProcessDeps & { bus: ResultBus }) {
  const { db, config, queues, logger, redis, bus } = deps;
  // What requests start after their commit and do not wait for; shutdown waits for it (src/server.ts).
  const later = createAfterAnswer(logger);
  const shared = createSharedServices(deps, {
    later,
    timelineCacheBytes: config.TICKET_TIMELINE_CACHE_MB * 1024 * 1024,
  });
  const { audit, events, channels, tickets, files, rollups, inboundFiles, outbound } = shared;
  const identity = createIdentityService({ db, config: section(config, 'identity', 'secrets'), audit });
  const apiKeys = createApiKeyService({ db, config: section(config, 'secrets'), audit });
  // Live intake goes first (src/intake/priority/): the lanes per workspace shared by channel ingest and provider
  // webhooks (the pressure reading and the yield of background work are the workers').
  const lanes = createIntakeLanes(section(config, 'intakePriority'));
  const ingest = createIngestGateway({ db, config: section(config, 'intake', 'redis', 'http'), redis, queues, bus, channels, lanes, files: inboundFiles });
  const helpCentre = createHelpCentreService({ db, config: section(config, 'helpCentre') });
  return {
    ...shared,
    later,
    identity,
    // Every budget the router's stages use (src/limits/): the API's, failed authentication, intake refusals, public reads.
    limits: createLimits({ redis, config: section(config, 'http', 'identity', 'intake', 'redis', 'search'), logger, knownToken: identity.knownToken }),
    idempotency: createIdempotencyService({ db, config: section(config, 'http', 'secrets') }),
    apiKeys,
    members: createMemberService({ db, audit, apiKeys }),
    agents: createAgentService({ db, audit }),
    workspaces: createWorkspaceService({ db, apiKeys, audit }),
    teams: createTeamService({ db, config: section(config, 'tickets'), tickets: tickets.commands }),
    savedViews: createSavedViewService({ db }),
    ingest,
    webChat: createWebChatService({ db, config: section(config, 'webChat', 'events', 'secrets', 'redis'), redis, logger, channels, ingest, files, live: events.live }),
    slaPolicies: createSlaPolicyService({ db }),
    schedules: createScheduleService({ db, queues, config: section(config, 'schedules'), logger }),
    work: createWorkService({ db, rollups, reports: shared.reports, tickets: { find: tickets.queries.find, bumpVersion: tickets.commands.bumpVersion }, events }),
    settings: createWorkspaceSettingsService({ db, config: section(config, 'secrets'), audit, reports: shared.reports }),
    helpCentre,
    articles: createArticleService({ db, config: section(config, 'helpCentre'), centres: helpCentre }),
    articleSearch: createArticleSearchService({ db, reads: shared.reads, search: section(config, 'search') }),
    webhooks: createWebhookService({ db, config: section(config, 'webhooks', 'secrets', 'http'), audit }),
    webhookIntake: createWebhookEdge({ db, config: section(config, 'webhooks', 'secrets', 'redis', 'http'), redis, queues, bus, lanes }),
    webhookEndpoints: createWebhookEndpointService({ db, config: section(config, 'outboundWebhooks', 'secrets'), audit, queues }),
    providerHooks: createProviderHooks({ db, config: section(config, 'http', 'intake'), channels, ingest, outbound }),
  };
}

/** The API's container: what the operation table's handlers are handed (src/define-operation.ts). */
export type ApiServices = ReturnType<typeof createApiServices>;
