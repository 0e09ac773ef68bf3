import { isIP } from 'node:net';
import { z } from 'zod';

const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v && v.trim() !== '' ? v : undefined));

/** The proxy names Express's `trust proxy` knows (proxy-addr's): each stands for a set of ranges. */
const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** One address or CIDR (`10.0.0.0/8`, `fd00::/8`), checked without a regular expression over the value. */
function addressOrCidr(entry: string): boolean {
  const slash = entry.indexOf('/');
  const address = slash < 0 ? entry : entry.slice(0, slash);
  const family = isIP(address);
  if (family === 0) return false;
  if (slash < 0) return true;
  const bits = entry.slice(slash + 1);
  const n = Number(bits);
  return bits.length > 0 && bits.length <= 3 && Number.isInteger(n) && n >= 0 && n <= (family === 4 ? 32 : 128);
}

/** TRUST_PROXY: `false`/`true`, a hop count, or a comma-separated list of addresses, CIDRs and proxy names. */
const trustProxy = z
  .string()
  .max(4096)
  .transform((v, ctx): boolean | number | string[] => {
    const t = v.trim();
    if (t === '' || t === 'false' || t === '0') return false;
    if (t === 'true') return true;
    if ([...t].every((c) => c >= '0' && c <= '9')) {
      const hops = Number(t);
      if (hops <= 64) return hops;
    }
    const entries = t.split(',').map((e) => e.trim()).filter((e) => e.length > 0);
    const bad = entries.find((e) => !PROXY_NAMES.has(e) && !addressOrCidr(e));
    if (entries.length === 0 || bad !== undefined) {
      ctx.addIssue({ code: 'custom', message: `must be false, true, a hop count (1–64) or a comma-separated list of proxy addresses, CIDRs and the names loopback, linklocal, uniquelocal${bad ? `; "${bad.slice(0, 64)}" is none of these` : ''}` });
      return z.NEVER;
    }
    return entries;
  });

// A development encryption key, for the same reason; production refuses it.
const DEV_ENCRYPTION_KEYS = 'dev:ZGV2LW9ubHktZW5jcnlwdGlvbi1rZXktMzItYnl0ZXM=';

/** `id:base64key,id:base64key`: every key decrypts, the last one listed encrypts (append a key to rotate). */
const encryptionKeys = z
  .string()
  .transform((v, ctx) => {
    const keys = v.split(',').map((pair) => pair.trim()).filter(Boolean).map((pair) => {
      const [id, b64] = pair.split(':');
      return { id: id ?? '', key: Buffer.from(b64 ?? '', 'base64') };
    });
    if (keys.length === 0 || keys.some((k) => !/^[A-Za-z0-9_-]{1,32}$/.test(k.id) || k.key.length !== 32) || new Set(keys.map((k) => k.id)).size !== keys.length) {
      ctx.addIssue({ code: 'custom', message: 'must be a comma-separated list of id:base64 pairs, each key 32 bytes, ids unique' });
      return z.NEVER;
    }
    return keys;
  });

// The development pepper exists so `npm run up` works on a laptop without ceremony; production refuses it.
const DEV_PEPPER = 'dev-only-pepper-change-me-in-production-0000';

/**
 * The configuration's sections, one per concern, in the order docs/operating.md and `.env.example` list them: a factory
 * is handed the sections it needs (`section`), never the whole config, so what each part of the service can read
 * is visible in its type.
 */
export const SECTION_NAMES = [
  'runtime',
  'http',
  'db',
  'redis',
  'secrets',
  'identity',
  'workers',
  'tickets',
  'events',
  'webChat',
  'intake',
  'intakePriority',
  'webhooks',
  'mailbox',
  'outbound',
  'helpCentre',
  'ops',
  'outboundWebhooks',
  'scanning',
  'files',
  'inboundFiles',
  'search',
  'schedules',
] as const;
export type SectionName = (typeof SECTION_NAMES)[number];

/** How one setting is declared: its section, its schema (type, bounds, default), its one-line meaning. */
export interface SettingSpec<S extends SectionName = SectionName, T extends z.ZodType = z.ZodType> {
  section: S;
  schema: T;
  /** The meaning, as the configuration table (docs/operating.md) and `.env.example` print it (markdown). */
  doc: string;
  /** Former names still read, each with a deprecation warning at start-up naming this one. */
  aliases?: readonly string[];
  /** What the documentation shows as the default when the value itself is not for printing (secrets, derived). */
  defaultDoc?: string;
}

const setting = <S extends SectionName, T extends z.ZodType>(section: S, schema: T, doc: string, extra: Pick<SettingSpec, 'aliases' | 'defaultDoc'> = {}): SettingSpec<S, T> => ({
  section,
  schema,
  doc,
  ...extra,
});

/**
 * Every variable the service reads, declared once (issue 35): its env name (the key), section, schema with its
 * default, and meaning. The zod schema, `CONFIG_SECTIONS`, the `Config` type, `.env.example` and the docs'
 * configuration table are all generated from this table (`npm run env:example`; test/env-example.test.ts fails
 * when either file is stale). Webhook settings carry their direction in their name: `INBOUND_WEBHOOK_*` for the
 * providers' webhooks this service receives, `OUTBOUND_WEBHOOK_*` for the endpoints it delivers events to.
 */
export const SETTINGS = {
  // ── runtime ──
  NODE_ENV: setting('runtime', z.enum(['development', 'test', 'production']).default('development'), '`development`, `test` or `production` (production refuses the development pepper)'),
  LOG_LEVEL: setting('runtime', z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'), 'pino level'),
  SHUTDOWN_GRACE_MS: setting('runtime', int(0, 600000).default(25000), 'how long SIGTERM waits for in-flight requests and jobs'),
  // ── http ──
  PORT: setting('http', int(0, 65535).default(8080), 'API port'),
  HOST: setting('http', z.string().default('0.0.0.0'), 'API bind address'),
  PUBLIC_BASE_URL: setting('http', z.url().optional(), 'external base URL, where links are built; also the URL Twilio signs for the native hooks (else the request\'s own protocol and host) and the base of the StatusCallback sent with SMS replies (none is sent without it)'),
  BODY_LIMIT_BYTES: setting('http', int(1024, 64 * 1024 * 1024).default(1024 * 1024), 'largest JSON body accepted (413 above)'),
  // Which proxies' X-Forwarded-For to believe (Express's `trust proxy`): false, a hop count, or the proxies'
  // addresses and CIDRs (and Express's names loopback, linklocal, uniquelocal). `true` believes every hop,
  // so the left-most address, which a caller writes: refused in production.
  TRUST_PROXY: setting('http', trustProxy.default(false), 'which proxies\' `X-Forwarded-*` to believe, as Express\'s `trust proxy`: a hop count (`1` behind one proxy) or the proxies\' addresses and CIDRs (`10.0.0.0/8,loopback`); this decides the client address the per-address budgets count. `true` (every hop, so the left-most address, which a caller writes) is refused in production'),
  JOB_WAIT_MS: setting('http', int(0, 120000).default(5000), 'how long a request awaits its job before answering 202'),
  // How long an Idempotency-Key's first answer is kept for replay (the draft suggests at least 24 hours).
  IDEMPOTENCY_TTL_SECONDS: setting('http', int(1, 30 * 86400).default(86400), 'how long an `Idempotency-Key`\'s first answer is kept for replay (expired keys are pruned hourly)'),
  // The largest answer kept whole for replay; a larger one is kept as a pointer to the resource it shows.
  IDEMPOTENCY_MAX_STORED_BYTES: setting('http', int(1024, 16 * 1024 * 1024).default(64 * 1024), 'the largest answer kept whole for replay (sealed under `ENCRYPTION_KEYS`); a larger ticket or article answer is kept as a pointer and replayed as the resource now stands'),
  // The authenticated API's budgets: per caller (API key, or user of an access token) and per workspace.
  API_RATE_POINTS: setting('http', int(1, 10_000_000).default(6000), 'authenticated requests per caller (API key, or user of an access token) per `API_RATE_WINDOW_SECONDS`; past it → `429 throttled` with `Retry-After`'),
  WORKSPACE_RATE_POINTS: setting('http', int(1, 100_000_000).default(20000), 'authenticated requests per workspace (all its callers together) per `API_RATE_WINDOW_SECONDS`; past it → `429 throttled` with `Retry-After`'),
  API_RATE_WINDOW_SECONDS: setting('http', int(1, 86400).default(60), 'the window of `API_RATE_POINTS` and `WORKSPACE_RATE_POINTS`'),
  // ── db ──
  DATABASE_URL: setting('db', z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').default('postgres://postgres@127.0.0.1:5432/helpdesk'), 'PostgreSQL; the database is created if absent'),
  PG_POOL_MAX: setting('db', int(1, 200).default(10), 'connections per process'),
  PG_CONNECT_TIMEOUT_MS: setting('db', int(100, 60000).default(2000), 'how long a request waits for a connection before answering 503'),
  PG_STATEMENT_TIMEOUT_MS: setting('db', int(100, 600000).default(15000), 'server-side statement timeout'),
  // How DATABASE_URL pools connections: 'session' (PostgreSQL itself, or a session-mode pooler) or
  // 'transaction' (PgBouncer in transaction mode: no startup parameters, no session state; issue 20).
  DATABASE_POOL_MODE: setting('db', z.enum(['session', 'transaction']).default('session'), '`transaction` behind PgBouncer in transaction mode: no startup parameters, the timeout becomes the database\'s default (see "PgBouncer")'),
  // A direct (session) connection for LISTEN, which a transaction-mode pooler cannot carry.
  DATABASE_LISTEN_URL: setting('db', optionalString.pipe(z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional()), 'a direct PostgreSQL URL for LISTEN (outbound webhook wake-ups); required when `DATABASE_POOL_MODE` is `transaction`'),
  // A read replica for rollup and list reads, and how far behind it may be before reads go to the primary.
  DATABASE_READ_URL: setting('db', optionalString.pipe(z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional()), 'a read replica for rollup and list reads (see "Read replica")'),
  DATABASE_READ_MAX_LAG_MS: setting('db', int(0, 600_000).default(2000), 'how far behind the replica may be before those reads go to the primary; also how long a caller\'s own writes send its reads to the primary'),
  // ── redis ──
  REDIS_URL: setting('redis', z.string().regex(/^rediss?:\/\//, 'must be a redis:// URL').default('redis://127.0.0.1:6379'), 'Redis for queues and throttles'),
  REDIS_PREFIX: setting('redis', z.string().regex(/^[A-Za-z0-9:_-]{1,64}$/, 'letters, digits, : _ - only').default('hd'), 'key prefix for every queue (tests use one per file)'),
  // A Redis Cluster's seed nodes (`host:port,host:port`); when set it replaces REDIS_URL (issue 20).
  REDIS_CLUSTER_NODES: setting('redis', optionalString
    .pipe(z.string().max(4096).optional())
    .transform((s, ctx) => {
      if (s === undefined) return undefined;
      const nodes = s.split(',').map((n) => n.trim()).filter((n) => n.length > 0).map((n) => {
        const colon = n.lastIndexOf(':');
        const port = Number(n.slice(colon + 1));
        return { host: n.slice(0, colon), port };
      });
      const bad = nodes.some((n) => n.host.length === 0 || !Number.isInteger(n.port) || n.port < 1 || n.port > 65535);
      if (nodes.length === 0 || bad) {
        ctx.addIssue({ code: 'custom', message: 'must be host:port pairs separated by commas' });
        return z.NEVER;
      }
      return nodes;
    }), 'a Redis Cluster\'s seed nodes, `host:port,host:port`; when set it replaces `REDIS_URL` (see "Redis Cluster")'),
  // Intake queues (ingest, webhooks) split by workspace into this many queues each, spread over a cluster's masters.
  INTAKE_QUEUE_SHARDS: setting('redis', int(1, 64).default(1), 'intake queues (`ingest`, `webhooks`) per kind, chosen by a hash of the workspace; spreads intake over a cluster\'s masters (see "Redis Cluster")'),
  // ── secrets ──
  API_KEY_PEPPER: setting('secrets', z.string().min(32, 'must be at least 32 characters').default(DEV_PEPPER), 'HMAC pepper for API key secrets (≥ 32 chars; required in production)', { defaultDoc: 'a development value (refused in production)' }),
  ENCRYPTION_KEYS: setting('secrets', encryptionKeys.prefault(DEV_ENCRYPTION_KEYS), '`id:base64,id:base64…`, each key 32 bytes: AES-256-GCM keys for OAuth tokens and provider keys. The last one encrypts, all decrypt: rotate by appending', { defaultDoc: 'a development key (refused in production)' }),
  // ── identity ──
  API_KEY_TOUCH_INTERVAL_SECONDS: setting('identity', int(1, 86400).default(60), '`last_used_at` is written at most once per key per interval'),
  REALM_JWKS_URL: setting('identity', z.url().optional(), 'JWKS of the identity realm (or `REALM_PUBLIC_KEY`)'),
  REALM_PUBLIC_KEY: setting('identity', optionalString, 'SPKI PEM public key of the realm (`\\n` escapes allowed)'),
  REALM_ISSUER: setting('identity', optionalString, 'required `iss` (required when a realm key is set)'),
  REALM_AUDIENCE: setting('identity', optionalString, 'required `aud`. With a realm key set and `NODE_ENV=production` the API refuses to start without it: otherwise a token the realm minted for any other application would be accepted'),
  REALM_ALGORITHMS: setting('identity', z
    .string()
    .default('RS256,ES256,EdDSA')
    .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean)), 'accepted JWT algorithms'),
  AUTH_FAILURE_RATE_POINTS: setting('identity', int(1, 10_000_000).default(30), 'failed authentications (401, or 404 for a token without membership) per client address per `AUTH_FAILURE_WINDOW_SECONDS` on the authenticated API; once spent, every request from that address presenting a credential answers `429 throttled` with `Retry-After` without checking it. Successes cost nothing; Redis unreachable → not applied (logged at warn)'),
  AUTH_FAILURE_WINDOW_SECONDS: setting('identity', int(1, 86400).default(60), 'the window of `AUTH_FAILURE_RATE_POINTS`'),
  // ── workers ──
  // How often overdue SLA targets are marked breached (one set-based sweep for every ticket; no per-ticket timers).
  SLA_SWEEP_SECONDS: setting('workers', int(1, 3600).default(10), 'how often the workers mark overdue SLA targets breached (one sweep over the due indexes; how late a breach can be recorded)'),
  WORKER_CONCURRENCY: setting('workers', int(1, 256).default(8), 'jobs in flight per queue per worker process'),
  // Which queues this worker process runs (issue 34): all by default. A comma list runs only those; WORKER_QUEUES_EXCEPT
  // leaves those out. Inbound files (hashing, decoding, disk writes) are worth a process of their own on a busy
  // host: in one process they share an event loop with intake's jobs, which then wait for it.
  WORKER_QUEUES: setting('workers', z.string().max(500).regex(/^[a-z, -]*$/, 'must be a comma-separated list of queue names').default(''), 'the queues this worker process runs, comma-separated (all when unset); e.g. `files` for a process of inbound files alone'),
  WORKER_QUEUES_EXCEPT: setting('workers', z.string().max(500).regex(/^[a-z, -]*$/, 'must be a comma-separated list of queue names').default(''), 'queues this worker process leaves to others, e.g. `files`; a name that is no queue stops the start'),
  // Reply sends one worker process runs at once (they wait on providers, not on this process).
  OUTBOUND_CONCURRENCY: setting('workers', int(1, 512).default(32), 'reply sends one worker process runs at once (they wait on providers)'),
  // Group commit of intake batches in a worker process (issue 20): transactions in flight per intake kind,
  // and the most messages one of them carries when queued batches are written together.
  INTAKE_WRITE_SLOTS: setting('workers', int(1, 256).default(2), 'intake transactions in flight per worker process (per kind: ingest, provider webhooks); batches queued behind them are written together. Live batches have one of their own beside these; a burst\'s (bulk) batches use these, one at a time within a second of a live write'),
  INTAKE_WRITE_MAX_ITEMS: setting('workers', int(1, 10_000).default(256), 'the most messages one intake transaction carries when queued batches are written together (see `INTAKE_WRITE_SLOTS`)'),
  WORKER_METRICS_PUSH_MS: setting('workers', int(100, 600000).default(5000), 'how often each worker process publishes its job metrics (duration histogram, failures) to Redis for the API\'s `/metrics`; a worker silent for 5 minutes drops out'),
  // Time-based rules (issue 37): the tickets one transaction of a rule's sweep locks, fires and commits at once.
  TIME_RULE_BATCH_SIZE: setting('workers', int(1, 5000).default(500), 'the most tickets a time rule fires on per transaction of its sweep: the most rows it locks at once'),
  // How long one of those transactions aims to take: the next batch is sized from what the last one cost.
  TIME_RULE_BATCH_MS: setting('workers', int(50, 60_000).default(1000), 'how long a batch of a time rule\'s sweep aims to take: each batch is sized (up to `TIME_RULE_BATCH_SIZE`) from what the last one cost, so a ticket stays locked about this long at most however slow its changes are'),
  TIME_RULE_LANES: setting('workers', int(1, 16).default(2), 'how many batches of one time rule\'s run go at once, each its own transaction and database connection: a batch mostly waits on the database, so two keep it busier; they share the rule\'s tickets without overlap (SKIP LOCKED and the firings\' key)'),
  AUDIT_RETENTION_DAYS: setting('workers', int(1, 36500).default(365), 'audit entries older than this are pruned daily'),
  // ── tickets ──
  PRESENCE_TTL_SECONDS: setting('tickets', int(1, 86400).default(300), 'presence not refreshed for this long counts as offline for round robin'),
  THREAD_WINDOW_HOURS: setting('tickets', int(1, 24 * 365).default(72), 'a chat message threads into the sender\'s open ticket updated within this window'),
  CUSTOMER_EXPORT_TTL_HOURS: setting('tickets', int(1, 24 * 365).default(72), 'how long a finished customer export (`POST /v1/customers/{customer_id}/export`) can be downloaded; its file, and the links to the customer\'s files inside it, expire then and the file is deleted by the hourly sweep'),
  // Rendered ticket timelines kept per process for GET /v1/tickets/{id}, in MiB (0: none kept).
  TICKET_TIMELINE_CACHE_MB: setting('tickets', int(0, 4096).default(32), 'rendered ticket timelines each API process keeps for `GET /v1/tickets/{id}`, checked against the ticket\'s version in the same statement that reads it (0: none kept)'),
  // ── events ──
  // Outbound events (issue 19): how long the log keeps them, and how a live stream tails it.
  EVENT_RETENTION_DAYS: setting('events', int(1, 3650).default(30), 'outbound events older than this leave the event log (pruned daily)'),
  EVENT_STREAM_POLL_MS: setting('events', int(50, 60_000).default(500), 'how often a live event stream (`GET /v1/events/stream`) looks for newly committed events'),
  EVENT_STREAM_HEARTBEAT_SECONDS: setting('events', int(1, 300).default(15), 'an idle event stream sends a comment this often, so proxies and clients see it alive'),
  // Live streams are bounded (issue 32): open streams per caller (API key, or user of an access token), per
  // workspace and per API process; how long a client may stay behind before its stream ends; how often an
  // idle stream checks its credential again; the largest event a frame carries (larger ones are references).
  EVENT_STREAMS_PER_CALLER: setting('events', int(1, 100_000).default(10), 'open event streams per API key (or user of an access token), counted in Redis across API processes; past it → `429 too_many_streams` with `Retry-After`'),
  EVENT_STREAMS_PER_WORKSPACE: setting('events', int(1, 1_000_000).default(100), 'open event streams per workspace, counted in Redis across API processes; past it → `429 too_many_streams` with `Retry-After`'),
  EVENT_STREAMS_PER_PROCESS: setting('events', int(1, 1_000_000).default(1000), 'open event streams per API process; past it → `429 too_many_streams` with `Retry-After`'),
  EVENT_STREAM_STALL_SECONDS: setting('events', int(1, 3600).default(30), 'a stream whose client reads nothing for this long while events wait for it is cut off (it resumes with `Last-Event-ID`, losing nothing)'),
  EVENT_STREAM_RECHECK_SECONDS: setting('events', int(1, 300).default(5), 'an idle stream checks its credential again this often (and before every delivery); a revoked key, a removed member or an expired token ends it'),
  EVENT_STREAM_MAX_EVENT_BYTES: setting('events', int(1024, 16 * 1024 * 1024).default(64 * 1024), 'the largest event a stream frame carries whole; a larger one is sent as a reference (`data_ref.url`, GET /v1/events/{id})'),
  // ── webChat ──
  // Web chat both ways (issue 33): how long a visitor token lasts (the widget renews it by resuming), how long
  // an API process trusts what it read of a connection (a rotated inbound token ends sessions within this),
  // a visitor's reads per minute, and open visitor streams per visitor, per workspace and per API process.
  WEB_CHAT_SESSION_TTL_SECONDS: setting('webChat', int(60, 90 * 86400).default(7 * 86400), 'how long a web chat visitor token lasts (7 days); the widget renews it by resuming its session (`POST /v1/web-chat/sessions` with the token)'),
  WEB_CHAT_CONNECTION_CACHE_MS: setting('webChat', int(0, 10_000).default(2000), 'how long an API process trusts what it read of a web chat connection (its inbound token\'s hash, enabled, allowed origins): a rotated inbound token or a disabled connection ends sessions within this (0: read every time)'),
  WEB_CHAT_READ_RATE_POINTS: setting('webChat', int(1, 1_000_000).default(600), 'reads (conversation pages, stream opens) per minute per web chat visitor; past it `429 throttled` with `Retry-After`'),
  WEB_CHAT_STREAMS_PER_VISITOR: setting('webChat', int(1, 1000).default(3), 'open web chat conversation streams per visitor, counted in Redis across API processes (apart from the event streams\' caps); past it → `429 too_many_streams` with `Retry-After`'),
  WEB_CHAT_STREAMS_PER_WORKSPACE: setting('webChat', int(1, 1_000_000).default(2000), 'open web chat conversation streams per workspace, counted in Redis across API processes; past it → `429 too_many_streams` with `Retry-After`'),
  WEB_CHAT_STREAMS_PER_PROCESS: setting('webChat', int(1, 1_000_000).default(5000), 'open web chat conversation streams per API process; past it → `429 too_many_streams` with `Retry-After`'),
  // ── intake ──
  INGEST_RATE_POINTS: setting('intake', int(1, 10_000_000).default(6000), 'ingest throttle per (workspace, channel) per `INGEST_RATE_WINDOW_SECONDS`: one point per message written (a request carrying N messages costs N; duplicates, ignored payloads and refusals cost nothing)'),
  INGEST_RATE_WINDOW_SECONDS: setting('intake', int(1, 86400).default(60), 'the window of `INGEST_RATE_POINTS`'),
  INGEST_BATCH_MAX: setting('intake', int(1, 1000).default(64), 'concurrent ingest messages coalesced into one queued job'),
  INGEST_BATCH_WINDOW_MS: setting('intake', int(0, 1000).default(2), 'how long the first ingest message of a batch waits for company'),
  INGEST_ROUTE_CACHE_MS: setting('intake', int(0, 60000).default(5000), 'how long the HTTP tier remembers that a workspace (or inbound token) has a channel connected; `0` asks the database every time. The worker re-checks inside its transaction, so a connection disabled or a token rotated meanwhile still gets 404 and nothing written'),
  INGEST_MAX_MESSAGES_PER_REQUEST: setting('intake', int(1, 10_000).default(100), 'messages one ingest request may carry (a WhatsApp delivery can batch several); more → `400 payload_too_complex`, nothing written'),
  // Refused intake requests (ingest and webhooks) per client address: refusals never touch a workspace's budget.
  INGEST_REFUSAL_RATE_POINTS: setting('intake', int(1, 10_000_000).default(120), 'refusals (4xx: unreadable payload, unknown connection or integration, bad signature, bad body) on the public intake routes (ingest and provider webhooks) per client address per `INGEST_REFUSAL_RATE_WINDOW_SECONDS`; past it that address\'s refusals answer `429 throttled` with `Retry-After`. Never charged to a workspace'),
  INGEST_REFUSAL_RATE_WINDOW_SECONDS: setting('intake', int(1, 86400).default(60), 'the window of `INGEST_REFUSAL_RATE_POINTS`'),
  // ── intakePriority ──
  // Live intake goes first (issue 35: one room, src/intake/priority/, one setting per idea). The lanes (issue 21),
  // per API process: a workspace's items queued to the workers at once (0: no limit), how many more may wait in
  // its lane before it is answered 429, and its share while the host's CPUs are saturated and others send too.
  INTAKE_WORKSPACE_QUEUED: setting('intakePriority', int(0, 100_000).default(32), 'fair sharing of intake, per API process: a workspace\'s items queued to the workers at once (0: no limit); items of a workspace in a burst are queued behind everyone else\'s'),
  INTAKE_WORKSPACE_WAITING: setting('intakePriority', int(0, 1_000_000).default(256), 'fair sharing of intake, per API process: how many more items of a workspace wait in its lane before it is answered 429 with `Retry-After`'),
  INTAKE_WORKSPACE_SHARED_QUEUED: setting('intakePriority', int(1, 100_000).default(2), 'fair sharing of intake, per API process: while the host\'s CPUs are saturated and other workspaces send intake too, a workspace\'s items queued at once (the rest waits in its lane)'),
  // Background work yields to live intake: one bound for all of it (it was two settings, one for the webhook senders).
  BACKGROUND_INTAKE_YIELD_MS: setting('intakePriority', int(0, 60_000).default(2000), 'longest background work in a worker (a webhook sender\'s round, rollup folds and sweeps, the SLA sweep, prunes) waits while live intake saturates the host\'s CPUs (0: never waits)', { aliases: ['OUTBOUND_WEBHOOK_INTAKE_YIELD_MS', 'WEBHOOK_INTAKE_YIELD_MS'] }),
  // ── webhooks ──
  INBOUND_WEBHOOK_BATCH_MAX: setting('webhooks', int(1, 1000).default(64), 'concurrent inbound provider webhook deliveries (Zendesk, Front, Help Scout) coalesced into one queued `webhooks.batch` job', { aliases: ['WEBHOOK_BATCH_MAX'] }),
  INBOUND_WEBHOOK_BATCH_WINDOW_MS: setting('webhooks', int(0, 1000).default(2), 'how long the first inbound provider webhook delivery of a batch waits for company', { aliases: ['WEBHOOK_BATCH_WINDOW_MS'] }),
  INBOUND_WEBHOOK_RATE_POINTS: setting('webhooks', int(1, 10_000_000).default(6000), 'ticket events an integration\'s inbound webhooks may write per `INBOUND_WEBHOOK_RATE_WINDOW_SECONDS` (one point per event worth writing; duplicates, refusals and ignored events give theirs back, as on ingest; 429 with `Retry-After`, and a throttled delivery is not recorded, so its replay is accepted)', { aliases: ['WEBHOOK_RATE_POINTS'] }),
  INBOUND_WEBHOOK_RATE_WINDOW_SECONDS: setting('webhooks', int(1, 86400).default(60), 'the window of `INBOUND_WEBHOOK_RATE_POINTS`', { aliases: ['WEBHOOK_RATE_WINDOW_SECONDS'] }),
  INBOUND_WEBHOOK_REQUIRE_SIGNATURE: setting('webhooks', bool.default(false), '`true` refuses inbound provider webhook deliveries to integrations without a signing secret (`401 signature_required`)', { aliases: ['WEBHOOKS_REQUIRE_SIGNATURE'] }),
  MAX_INTEGRATIONS_PER_WORKSPACE: setting('webhooks', int(1, 100_000).default(20), 'integrations (each with its own webhook budget) a workspace may hold; one more → `409 integration_limit_reached`'),
  // ── mailbox ──
  // Mail providers (connected mailbox). Every base URL is configurable so a deployment can point at a
  // regional endpoint and the tests at a provider double on loopback.
  OAUTH_REDIRECT_URL: setting('mailbox', z.url().optional(), 'where the mail provider sends the admin back (your front end, which posts `code` and `state` to the complete operation)', { defaultDoc: '`PUBLIC_BASE_URL` + `/oauth/<provider>/callback`' }),
  // How long a minted OAuth state may be completed. Providers' own codes live about ten minutes.
  OAUTH_STATE_TTL_SECONDS: setting('mailbox', int(1, 86400).default(600), 'how long a started mailbox connection (its OAuth `state`) may be completed'),
  GOOGLE_CLIENT_ID: setting('mailbox', optionalString, 'Google OAuth client id; without it `start` answers `409 mail_provider_not_configured`'),
  GOOGLE_CLIENT_SECRET: setting('mailbox', optionalString, 'Google OAuth client secret'),
  GOOGLE_AUTH_URL: setting('mailbox', z.url().default('https://accounts.google.com/o/oauth2/v2/auth'), 'Google\'s OAuth authorization endpoint; overridable (the tests point it at a provider double)'),
  GOOGLE_TOKEN_URL: setting('mailbox', z.url().default('https://oauth2.googleapis.com/token'), 'Google\'s OAuth token endpoint; overridable'),
  GOOGLE_GMAIL_API_URL: setting('mailbox', z.url().default('https://gmail.googleapis.com'), 'the Gmail API; overridable'),
  MICROSOFT_CLIENT_ID: setting('mailbox', optionalString, 'Microsoft identity platform client id; without it `start` answers `409 mail_provider_not_configured`'),
  MICROSOFT_CLIENT_SECRET: setting('mailbox', optionalString, 'Microsoft identity platform client secret'),
  MICROSOFT_AUTH_URL: setting('mailbox', z.url().default('https://login.microsoftonline.com/common/oauth2/v2.0/authorize'), 'Microsoft\'s authorization endpoint (`common` tenant); overridable'),
  MICROSOFT_TOKEN_URL: setting('mailbox', z.url().default('https://login.microsoftonline.com/common/oauth2/v2.0/token'), 'Microsoft\'s token endpoint (`common` tenant); overridable'),
  MICROSOFT_GRAPH_API_URL: setting('mailbox', z.url().default('https://graph.microsoft.com'), 'Microsoft Graph; overridable'),
  MAIL_PROVIDER_TIMEOUT_MS: setting('mailbox', int(100, 120000).default(10000), 'per provider call'),
  MAILBOX_REFRESH_SECONDS: setting('mailbox', int(60, 7 * 86400).default(3600), 'scheduled health refresh per connected mailbox: a mailbox is checked again once its last check is this old'),
  MAILBOX_POLL_SECONDS: setting('mailbox', int(10, 86400).default(60), 'how often each connected mailbox\'s inbox is polled'),
  MAILBOX_DAILY_SEND_LIMIT: setting('mailbox', int(1, 1_000_000).default(2000), 'replies per mailbox per UTC day before sends are blocked (warning from 80 %)'),
  // ── outbound ──
  // Replies on every channel (issue 33). Each provider's base URL defaults to its public API, so tests point
  // it at a double. A send that gets no answer within OUTBOUND_SEND_TIMEOUT_MS after its request may have
  // left ends `unknown`; a claim older than OUTBOUND_CLAIM_SECONDS (its worker died mid-send) too.
  POSTMARK_API_URL: setting('outbound', z.url().default('https://api.postmarkapp.com'), 'Postmark\'s email API (email replies when no mailbox is connected)'),
  TWILIO_API_URL: setting('outbound', z.url().default('https://api.twilio.com'), 'Twilio\'s REST API (SMS replies)'),
  WHATSAPP_API_URL: setting('outbound', z.url().default('https://graph.facebook.com'), 'Meta\'s Graph API (WhatsApp Cloud API replies)'),
  WHATSAPP_API_VERSION: setting('outbound', z.string().regex(/^v\d{1,3}\.\d{1,3}$/, 'must look like v23.0').default('v23.0'), 'the Graph API version WhatsApp sends use'),
  TELEGRAM_API_URL: setting('outbound', z.url().default('https://api.telegram.org'), 'the Telegram Bot API (Telegram replies)'),
  OUTBOUND_SEND_TIMEOUT_MS: setting('outbound', int(100, 120000).default(10000), 'how long a send waits for the provider; no answer after the request may have left ends the reply `unknown` (never retried automatically)'),
  OUTBOUND_RETRY_BASE_MS: setting('outbound', int(10, 3_600_000).default(2000), 'a reply\'s first retry wait, doubling per attempt up to an hour; a provider\'s Retry-After (or Telegram\'s retry_after) is honoured when longer'),
  OUTBOUND_CLAIM_SECONDS: setting('outbound', int(1, 86400).default(120), 'a send claimed longer ago than this (its worker died mid-send) is declared `unknown` by the outbound sweep'),
  OUTBOUND_ATTEMPTS: setting('outbound', int(1, 20).default(5), 'tries per reply while its provider cannot have it (connect error, 5xx, 429); then the reply is `failed`'),
  // ── helpCentre ──
  HELP_CENTRE_BASE_DOMAIN: setting('helpCentre', z.string().regex(/^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/, 'must be a lower-case DNS name').default('help.localhost.test'), 'help centres get their primary host `<subdomain_label>.<this>`'),
  // The help centre's article render pool (worker threads): its size, the time one render may take before
  // it is stopped (400 payload_too_complex), and how long a render may wait for a thread (503 past it).
  RENDER_THREADS: setting('helpCentre', int(1, 64).default(2), 'worker threads that render help-centre articles (markdown, sanitiser, HTML → markdown) off the request event loop'),
  RENDER_BUDGET_MS: setting('helpCentre', int(50, 60000).default(700), 'how long one article render may run before it is stopped and refused (`400 payload_too_complex`)'),
  RENDER_QUEUE_WAIT_MS: setting('helpCentre', int(50, 60000).default(2000), 'how long a render may wait for a free thread before the request answers 503 with `Retry-After`'),
  // ── ops ──
  OPS_USER: setting('ops', optionalString, 'HTTP basic user for `/admin/queues` (Bull Board: every queue, retry and clean) and `/metrics` (Prometheus), with `OPS_PASSWORD`; required in production; unset elsewhere, neither is served and a log line says so. `npm run jobs -- retry-failed --queue <name>` retries failed jobs from a shell', { defaultDoc: 'unset (`npm run up` generates a development login)' }),
  OPS_PASSWORD: setting('ops', optionalString, 'HTTP basic password for `/admin/queues` and `/metrics`, with `OPS_USER`; required in production', { defaultDoc: 'unset (`npm run up` generates a development login)' }),
  // ── outboundWebhooks ──
  // Outbound webhooks (issue 19). http:// endpoints are refused unless this is on and the host is loopback.
  OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: setting('outboundWebhooks', bool.default(false), 'development only (refused in production): accept `http://` webhook endpoint URLs on loopback (`127.0.0.1`, `::1`, `localhost`) and deliver to loopback addresses; otherwise endpoints must be `https://` and loopback is refused', { aliases: ['WEBHOOK_ALLOW_HTTP_LOOPBACK'] }),
  // Outbound webhooks to private networks (10/8, 192.168/16, link-local, fc00::/7 …) are refused unless set.
  OUTBOUND_WEBHOOK_ALLOW_PRIVATE_NETWORKS: setting('outboundWebhooks', bool.default(false), 'deliver webhooks to private, shared and link-local addresses (`10/8`, `172.16/12`, `192.168/16`, `100.64/10`, `169.254/16`, `fc00::/7`, `fe80::/10`); off, an endpoint resolving to one is refused at send (and an IP literal at creation), so a workspace cannot make the workers reach internal services', { aliases: ['WEBHOOK_ALLOW_PRIVATE_NETWORKS'] }),
  OUTBOUND_WEBHOOK_SECRET_OVERLAP_SECONDS: setting('outboundWebhooks', int(0, 30 * 86400).default(86400), 'after a secret rotation, how long the previous endpoint secret keeps signing beside the new one', { aliases: ['WEBHOOK_SECRET_OVERLAP_SECONDS'] }),
  OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS: setting('outboundWebhooks', int(100, 120000).default(10000), 'how long one webhook POST may take before it counts as failed and is retried', { aliases: ['WEBHOOK_DELIVERY_TIMEOUT_MS'] }),
  // Hours a delivery is retried before it is marked failed; fractional so tests can use seconds.
  OUTBOUND_WEBHOOK_RETRY_HOURS: setting('outboundWebhooks', z.coerce.number().min(0.0001).max(30 * 24).default(72), 'how long a webhook delivery is retried (exponential backoff with full jitter) before it is marked failed; fractions allowed', { aliases: ['WEBHOOK_RETRY_HOURS'] }),
  OUTBOUND_WEBHOOK_RETRY_BASE_MS: setting('outboundWebhooks', int(10, 3_600_000).default(5000), 'the first retry\'s backoff ceiling; each later retry doubles it (capped at 6 h)', { aliases: ['WEBHOOK_RETRY_BASE_MS'] }),
  OUTBOUND_WEBHOOK_DISABLE_AFTER_FAILURES: setting('outboundWebhooks', int(1, 100_000).default(20), 'consecutive failed events after which an endpoint is disabled (audit entry `endpoint.disabled`)', { aliases: ['WEBHOOK_DISABLE_AFTER_FAILURES'] }),
  OUTBOUND_WEBHOOK_ENDPOINT_CONCURRENCY: setting('outboundWebhooks', int(1, 64).default(16), 'webhook POSTs in flight per endpoint at most (one per ticket at a time in any case)', { aliases: ['WEBHOOK_ENDPOINT_CONCURRENCY'] }),
  // Fair sending across workspaces (issue 32): endpoints of one workspace sending at once (across worker
  // processes), endpoints a workspace may hold, and each endpoint's circuit breaker (failed attempts in a row
  // that open it, and the first wait before it is probed; doubling after each failed probe).
  OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY: setting('outboundWebhooks', int(1, 1024).default(4), 'endpoints of one workspace sending at once, across every worker process (the others wait their turn, oldest first): a workspace\'s slow receivers hold at most this many delivery slots', { aliases: ['WEBHOOK_WORKSPACE_CONCURRENCY'] }),
  OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE: setting('outboundWebhooks', int(1, 100_000).default(20), 'webhook endpoints a workspace may hold (`409 endpoint_limit_reached` beyond)', { aliases: ['WEBHOOK_ENDPOINTS_PER_WORKSPACE'] }),
  OUTBOUND_WEBHOOK_CIRCUIT_FAILURES: setting('outboundWebhooks', int(1, 10_000).default(5), 'an endpoint\'s circuit breaker: this many failed attempts in a row stop sends to it for `OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS`', { aliases: ['WEBHOOK_CIRCUIT_FAILURES'] }),
  OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS: setting('outboundWebhooks', z.coerce.number().min(0.1).max(86_400).default(30), 'how long an open circuit stops sends to an endpoint (doubling while its probes fail, at most 16 times as long); then one event probes it', { aliases: ['WEBHOOK_CIRCUIT_OPEN_SECONDS'] }),
  OUTBOUND_WEBHOOK_DELIVERY_CONCURRENCY: setting('outboundWebhooks', int(1, 1024).default(32), 'webhook POSTs in flight per worker process (the `deliveries` queue\'s concurrency)', { aliases: ['WEBHOOK_DELIVERY_CONCURRENCY'] }),
  OUTBOUND_WEBHOOK_SWEEP_MS: setting('outboundWebhooks', int(200, 3_600_000).default(30000), 'safety-net sweep of the delivery engine: wakes senders a missed wake-up left idle and hands over deliveries whose worker died', { aliases: ['WEBHOOK_SWEEP_MS'] }),
  // ── scanning ──
  // Optional virus scanning of attachments through clamd's INSTREAM over TCP (issue 34): no scanner when
  // CLAMAV_HOST is unset. The timeout bounds one whole scan (connecting, streaming the file, the answer).
  CLAMAV_HOST: setting('scanning', optionalString, 'clamd to scan attachments with, over TCP (its `TCPSocket`); unset: no scanning (see "Virus scanning")'),
  CLAMAV_PORT: setting('scanning', int(1, 65535).default(3310), 'clamd\'s TCP port'),
  CLAMAV_TIMEOUT_MS: setting('scanning', int(100, 600_000).default(30_000), 'the longest one scan may take (connecting, streaming the file, clamd\'s answer); past it the scan is an error, not clean'),
  // ── files ──
  // Attachments (issue 34). Bytes go to a directory on disk (FILES_DIR, relative to the working directory) unless
  // FILES_S3_BUCKET names an S3-compatible bucket. One file is at most FILES_MAX_BYTES; a workspace holds at most
  // FILES_WORKSPACE_QUOTA_BYTES; an upload's token is good for FILES_UPLOAD_TTL_SECONDS; a download from S3 is a
  // redirect to a URL presigned for FILES_S3_PRESIGN_SECONDS (0: the API streams the bytes itself).
  FILES_DIR: setting('files', z.string().min(1).max(4096).default('data/files'), 'the directory attachments\' bytes are kept in when no S3 bucket is set (relative to the working directory; the API and the workers must share it); see "Attachments"'),
  FILES_MAX_BYTES: setting('files', int(1, 5 * 1024 * 1024 * 1024).default(25 * 1024 * 1024), 'the largest file (25 MiB): a larger upload is `413 file_too_large`, answered as soon as the limit is passed without reading the rest'),
  FILES_UPLOAD_TTL_SECONDS: setting('files', int(60, 7 * 86400).default(3600), 'how long an upload\'s token may be named in a reply or note; unused uploads are removed after it'),
  FILES_WORKSPACE_QUOTA_BYTES: setting('files', int(0, Number.MAX_SAFE_INTEGER).default(10 * 1024 * 1024 * 1024), 'the bytes of files a workspace may hold (10 GiB; 0: no quota); past it uploads are `413 files_quota_exceeded`, customers\' files `skipped`, and `files.quota_reached` goes to the event log once'),
  FILES_S3_ENDPOINT: setting('files', z.url().optional(), 'an S3-compatible endpoint (MinIO, Ceph, R2 …); AWS S3 when unset'),
  FILES_S3_BUCKET: setting('files', optionalString.pipe(z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be an S3 bucket name').optional()), 'an S3 bucket for attachments\' bytes; set, it replaces `FILES_DIR` (the bucket must exist)'),
  FILES_S3_REGION: setting('files', z.string().min(1).max(64).default('us-east-1'), 'the bucket\'s region'),
  FILES_S3_ACCESS_KEY_ID: setting('files', optionalString, 'static access key id for the bucket (with `FILES_S3_SECRET_ACCESS_KEY`: both or neither); unset: the AWS default chain (environment, profile, instance role)'),
  FILES_S3_SECRET_ACCESS_KEY: setting('files', optionalString, 'static secret access key for the bucket (with `FILES_S3_ACCESS_KEY_ID`: both or neither)'),
  FILES_S3_FORCE_PATH_STYLE: setting('files', bool.default(false), 'path-style URLs (`endpoint/bucket/key`), which most S3-compatible servers need'),
  FILES_S3_PRESIGN_SECONDS: setting('files', int(0, 7 * 86400).default(0), 'with the S3 store, a download answers `302` to a URL presigned for this long instead of streaming the bytes through the API (0: streamed by the API, with its own headers)'),
  // ── inboundFiles ──
  // Inbound files (issue 34): files one customer message may bring (the rest are listed as skipped), downloads
  // one worker process runs at once, the time one file may take (provider lookup and download together), and
  // the hosts besides TWILIO_API_URL's own a Twilio MediaUrl may name (`*.` for any subdomain): a MediaUrl
  // anywhere else is never fetched (it comes from the payload, and the account's credentials go with it).
  FILES_MAX_PER_MESSAGE: setting('inboundFiles', int(1, 100).default(20), 'files of one customer message that are fetched; the rest are listed on the event as `skipped` (up to 100 more, and the number beyond that in `meta.files_omitted`)'),
  // The largest inbound email body (POST /v1/hooks/email/…, POST /v1/ingest/email) with its files inside the
  // JSON as base64: Postmark takes mail up to 35 MB, which its JSON carries in about 48 MB. Over BODY_LIMIT_BYTES
  // it is read as it arrives and the files' text goes straight to the file store (src/lib/spooled-json.ts).
  INGEST_EMAIL_MAX_BYTES: setting('inboundFiles', int(1024, 1024 * 1024 * 1024).default(50 * 1024 * 1024), 'the largest inbound email body (50 MiB) on the email hook and `POST /v1/ingest/email`; a body over `BODY_LIMIT_BYTES` is read as it arrives, its attachments\' text written to the file store, the rest within `BODY_LIMIT_BYTES` (413 `payload_too_large` past either)'),
  FILES_FETCH_CONCURRENCY: setting('inboundFiles', int(1, 256).default(8), 'inbound file downloads one worker process runs at once (the `files` queue\'s concurrency)'),
  FILES_FETCH_TIMEOUT_MS: setting('inboundFiles', int(100, 600_000).default(60_000), 'the longest one inbound file may take, provider lookup and download together; past it the file is `failed` (`no complete answer within … ms`)'),
  TWILIO_MEDIA_HOSTS: setting('inboundFiles', z.string().max(2048).regex(/^[a-z0-9.*,\s-]*$/i, 'must be a comma-separated list of host names (*.example.com for subdomains)').default('api.twilio.com,*.twilio.com'), 'hosts besides `TWILIO_API_URL`\'s origin a Twilio `MediaUrl` may name (https, default port; `*.` for subdomains). A MediaUrl elsewhere is never fetched: it comes from the payload, and the account\'s credentials would go with it'),
  // ── search ──
  // Search (issue 36): what one query may ask of the database, refused with 400 past it or 422 when it runs too long.
  SEARCH_QUERY_MAX_CHARS: setting('search', int(16, 4096).default(512), 'the longest search query (`q`) accepted, in characters; longer is 400 `query_too_long`'),
  SEARCH_QUERY_MAX_TERMS: setting('search', int(1, 256).default(32), 'the most words, phrases and operators one search query may hold; more is 400 `query_too_complex`'),
  SEARCH_TIMEOUT_MS: setting('search', int(50, 60_000).default(3000), 'the longest one search may run in PostgreSQL (`statement_timeout`); past it the search is 422 `query_too_expensive` and nothing else is held'),
  // The help centres' public search takes no credential: each client address gets a budget of searches.
  PUBLIC_SEARCH_RATE_POINTS: setting('search', int(1, 10_000_000).default(60), 'searches one client address may run on the public help-centre search (`GET /v1/help-centres/{help_centre_id}/search`) per `PUBLIC_SEARCH_RATE_WINDOW_SECONDS`; past it `429 throttled` with `Retry-After`'),
  PUBLIC_SEARCH_RATE_WINDOW_SECONDS: setting('search', int(1, 86400).default(60), 'the window of `PUBLIC_SEARCH_RATE_POINTS`'),
  // ── schedules ──
  // Business hours (issue 37): reading a schedule's iCal holiday feed (an admin's URL, so guarded like outbound
  // webhooks: every address the host resolves to is checked) and recomputing open tickets after a change.
  SCHEDULE_ICAL_TIMEOUT_MS: setting('schedules', int(100, 120_000).default(10_000), 'how long reading one iCal holiday feed may take, the lookup and the whole body included; past it the read fails and the schedule keeps the holidays it had (`ical_error` says why)'),
  SCHEDULE_ICAL_MAX_BYTES: setting('schedules', int(1024, 64 * 1024 * 1024).default(2 * 1024 * 1024), 'the largest iCal holiday feed read; a larger one fails the read (`ical_error`) and the schedule keeps the holidays it had'),
  SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK: setting('schedules', bool.default(false), 'development only (refused in production): accept `http://` iCal feed URLs on loopback and read feeds from loopback addresses; otherwise feeds must be `https://` and loopback is refused'),
  SCHEDULE_ICAL_ALLOW_PRIVATE_NETWORKS: setting('schedules', bool.default(false), 'read iCal feeds from private, shared and link-local addresses; off, a feed resolving to one fails the read (and an IP literal is refused when the URL is set), so a workspace cannot make the workers reach internal services'),
  SCHEDULE_RECOMPUTE_BATCH: setting('schedules', int(10, 10_000).default(1000), 'open tickets whose due times one statement rewrites after a schedule change (each batch holds its rows\' locks for its one `UPDATE` only)'),
} satisfies Record<string, SettingSpec>;

type Settings = typeof SETTINGS;
type SettingKey = keyof Settings;
type Shape = { [K in SettingKey]: Settings[K]['schema'] };

/** Every variable the service reads (optional ones included), in the table's order. */
export const CONFIG_KEYS = Object.keys(SETTINGS) as SettingKey[];

const schema = z
  .object(Object.fromEntries(CONFIG_KEYS.map((k) => [k, SETTINGS[k].schema])) as Shape)
  .superRefine((c, ctx) => {
    if (c.DATABASE_POOL_MODE === 'transaction' && !c.DATABASE_LISTEN_URL) {
      ctx.addIssue({ code: 'custom', path: ['DATABASE_LISTEN_URL'], message: 'must be set (a direct PostgreSQL URL for LISTEN) when DATABASE_POOL_MODE is transaction' });
    }
    if (c.NODE_ENV === 'production' && c.API_KEY_PEPPER === DEV_PEPPER) {
      ctx.addIssue({ code: 'custom', path: ['API_KEY_PEPPER'], message: 'must be set to a secret value in production' });
    }
    if (c.NODE_ENV === 'production' && c.ENCRYPTION_KEYS.some((k) => k.key.equals(Buffer.from(DEV_ENCRYPTION_KEYS.split(':')[1]!, 'base64')))) {
      ctx.addIssue({ code: 'custom', path: ['ENCRYPTION_KEYS'], message: 'must not contain the development key in production' });
    }
    if ((c.REALM_JWKS_URL || c.REALM_PUBLIC_KEY) && !c.REALM_ISSUER) {
      ctx.addIssue({ code: 'custom', path: ['REALM_ISSUER'], message: 'is required when REALM_JWKS_URL or REALM_PUBLIC_KEY is set' });
    }
    // Without an audience check a token the realm minted for any other application would be accepted here.
    if (c.NODE_ENV === 'production' && (c.REALM_JWKS_URL || c.REALM_PUBLIC_KEY) && !c.REALM_AUDIENCE) {
      ctx.addIssue({ code: 'custom', path: ['REALM_AUDIENCE'], message: 'is required in production when REALM_JWKS_URL or REALM_PUBLIC_KEY is set' });
    }
    // The queue dashboard and /metrics are an operator's only window on the workers: a production deployment
    // names their login (development gets a generated one from `npm run up`).
    if (c.NODE_ENV === 'production' && (!c.OPS_USER || !c.OPS_PASSWORD)) {
      ctx.addIssue({ code: 'custom', path: [c.OPS_USER ? 'OPS_PASSWORD' : 'OPS_USER'], message: 'is required in production (the queue dashboard and /metrics login)' });
    }
    // Settings that exist for a developer's machine and open a hole anywhere else: production names each one set.
    const developmentOnly = [
      ...(c.OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK ? ['OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK=true (webhook endpoints on http:// loopback, this host\'s own ports)'] : []),
      ...(c.SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK ? ['SCHEDULE_ICAL_ALLOW_HTTP_LOOPBACK=true (iCal feeds on http:// loopback, this host\'s own ports)'] : []),
      ...(c.TRUST_PROXY === true ? ['TRUST_PROXY=true (believes every X-Forwarded-For hop, so the address a caller writes; set the hop count or the proxies\' addresses)'] : []),
    ];
    if (c.NODE_ENV === 'production' && developmentOnly.length > 0) {
      ctx.addIssue({ code: 'custom', path: [developmentOnly[0]!.split('=')[0]!], message: `is a development-only setting, refused in production: ${developmentOnly.join('; ')}` });
    }
    if (Boolean(c.FILES_S3_ACCESS_KEY_ID) !== Boolean(c.FILES_S3_SECRET_ACCESS_KEY)) {
      ctx.addIssue({ code: 'custom', path: [c.FILES_S3_ACCESS_KEY_ID ? 'FILES_S3_SECRET_ACCESS_KEY' : 'FILES_S3_ACCESS_KEY_ID'], message: 'set both FILES_S3_ACCESS_KEY_ID and FILES_S3_SECRET_ACCESS_KEY, or neither (the AWS default credential chain)' });
    }
    if (c.REALM_JWKS_URL && c.REALM_PUBLIC_KEY) {
      ctx.addIssue({ code: 'custom', path: ['REALM_PUBLIC_KEY'], message: 'set either REALM_JWKS_URL or REALM_PUBLIC_KEY, not both' });
    }
  });

export type Config = z.infer<typeof schema>;

type KeysIn<S extends SectionName> = { [K in SettingKey]: Settings[K]['section'] extends S ? K : never }[SettingKey];

/**
 * The configuration in sections, derived from the table: every variable belongs to exactly one section, the one
 * its row names.
 */
export const CONFIG_SECTIONS = Object.fromEntries(SECTION_NAMES.map((s) => [s, CONFIG_KEYS.filter((k) => SETTINGS[k].section === s)])) as unknown as {
  readonly [S in SectionName]: readonly KeysIn<S>[];
};

/** The variables of the named sections, and nothing else. */
export type ConfigSection<S extends SectionName> = Pick<Config, (typeof CONFIG_SECTIONS)[S][number]>;

/** A copy of `config` holding only the named sections' variables. */
export function section<S extends SectionName>(config: Config, ...names: S[]): ConfigSection<S> {
  const keys = names.flatMap((n) => CONFIG_SECTIONS[n] as readonly (keyof Config)[]);
  return Object.fromEntries(keys.map((k) => [k, config[k]])) as ConfigSection<S>;
}

/** Old name → the setting it now names (the table's `aliases`). */
export const DEPRECATED_ALIASES: ReadonlyMap<string, SettingKey> = new Map(CONFIG_KEYS.flatMap((k) => ((SETTINGS[k] as SettingSpec).aliases ?? []).map((a) => [a, k] as const)));

let defaults: Config | undefined;
/** The configuration of an empty environment: every default, as the table declares it (`src/queue/jobs.ts` reads these). */
export function configDefaults(): Config {
  defaults ??= schema.parse({});
  return defaults;
}

/** Start-up warnings go to stderr once per old name per process (a test passes its own `warn`). */
const warned = new Set<string>();
const warnOnce = (line: string, oldName: string) => {
  if (warned.has(oldName)) return;
  warned.add(oldName);
  process.stderr.write(`${line}\n`);
};

export interface LoadOptions {
  /** Receives one line per deprecated name the environment sets; by default written to stderr once per process. */
  warn?: (line: string) => void;
}

/** The environment with deprecated names carried over to their new ones, and one warning line per old name set. */
function resolveAliases(env: NodeJS.ProcessEnv, warn: (line: string, oldName: string) => void): { env: NodeJS.ProcessEnv; via: Map<string, string> } {
  const out: NodeJS.ProcessEnv = { ...env };
  const via = new Map<string, string>();
  for (const [oldName, newName] of DEPRECATED_ALIASES) {
    if (env[oldName] === undefined) continue;
    if (env[newName] !== undefined) {
      warn(`Deprecated configuration: ${oldName} is ignored because ${newName} is set; remove ${oldName}`, oldName);
      continue;
    }
    // Two settings merged into one (issue 35: the yields): the first old name set is read, the other ignored.
    const first = via.get(newName);
    if (first !== undefined) {
      warn(`Deprecated configuration: ${oldName} is ignored because ${first} is set (both are now ${newName}); set ${newName} and remove both`, oldName);
      continue;
    }
    out[newName] = env[oldName];
    via.set(newName, oldName);
    warn(`Deprecated configuration: ${oldName} is now ${newName}; the old name is still read for now, rename it`, oldName);
  }
  return { env: out, via };
}

export class ConfigError extends Error {}

/** Parses an environment into a typed config; the error message names the first offending variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, options: LoadOptions = {}): Config {
  const resolved = resolveAliases(env, options.warn ? (line) => options.warn!(line) : warnOnce);
  const result = schema.safeParse(resolved.env);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const key = String(issue.path[0] ?? 'environment');
    const oldName = resolved.via.get(key);
    const name = oldName ? `${key} (set as the deprecated ${oldName})` : key;
    const raw = resolved.env[key];
    const shown = raw === undefined || /PEPPER|KEY|SECRET|PASSWORD/.test(key) ? '' : ` (got "${raw}")`;
    throw new ConfigError(`Invalid configuration: ${name} ${issue.message}${shown}`);
  }
  return result.data;
}

/** For process entry points: a bad value stops the process with one clear line. */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
