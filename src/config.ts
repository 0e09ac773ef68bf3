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

const schema = z
  .object({
    NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
    PORT: int(0, 65535).default(8080),
    HOST: z.string().default('0.0.0.0'),
    PUBLIC_BASE_URL: z.url().optional(),
    DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').default('postgres://postgres@127.0.0.1:5432/helpdesk'),
    PG_POOL_MAX: int(1, 200).default(10),
    PG_CONNECT_TIMEOUT_MS: int(100, 60000).default(2000),
    PG_STATEMENT_TIMEOUT_MS: int(100, 600000).default(15000),
    // How DATABASE_URL pools connections: 'session' (PostgreSQL itself, or a session-mode pooler) or
    // 'transaction' (PgBouncer in transaction mode: no startup parameters, no session state; issue 20).
    DATABASE_POOL_MODE: z.enum(['session', 'transaction']).default('session'),
    // A read replica for rollup and list reads, and how far behind it may be before reads go to the primary.
    DATABASE_READ_URL: optionalString.pipe(z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional()),
    DATABASE_READ_MAX_LAG_MS: int(0, 600_000).default(2000),
    // A direct (session) connection for LISTEN, which a transaction-mode pooler cannot carry.
    DATABASE_LISTEN_URL: optionalString.pipe(z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional()),
    REDIS_URL: z.string().regex(/^rediss?:\/\//, 'must be a redis:// URL').default('redis://127.0.0.1:6379'),
    REDIS_PREFIX: z.string().regex(/^[A-Za-z0-9:_-]{1,64}$/, 'letters, digits, : _ - only').default('hd'),
    // Intake queues (ingest, webhooks) split by workspace into this many queues each, spread over a cluster's masters.
    INTAKE_QUEUE_SHARDS: int(1, 64).default(1),
    // A Redis Cluster's seed nodes (`host:port,host:port`); when set it replaces REDIS_URL (issue 20).
    REDIS_CLUSTER_NODES: optionalString
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
      }),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024).default(1024 * 1024),
    API_KEY_PEPPER: z.string().min(32, 'must be at least 32 characters').default(DEV_PEPPER),
    API_KEY_TOUCH_INTERVAL_SECONDS: int(1, 86400).default(60),
    REALM_JWKS_URL: z.url().optional(),
    REALM_PUBLIC_KEY: optionalString,
    REALM_ISSUER: optionalString,
    REALM_AUDIENCE: optionalString,
    REALM_ALGORITHMS: z
      .string()
      .default('RS256,ES256,EdDSA')
      .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean)),
    JOB_WAIT_MS: int(0, 120000).default(5000),
    // The authenticated API's budgets: per caller (API key, or user of an access token) and per workspace.
    API_RATE_POINTS: int(1, 10_000_000).default(6000),
    WORKSPACE_RATE_POINTS: int(1, 100_000_000).default(20000),
    API_RATE_WINDOW_SECONDS: int(1, 86400).default(60),
    // How long an Idempotency-Key's first answer is kept for replay (the draft suggests at least 24 hours).
    IDEMPOTENCY_TTL_SECONDS: int(1, 30 * 86400).default(86400),
    // The largest answer kept whole for replay; a larger one is kept as a pointer to the resource it shows.
    IDEMPOTENCY_MAX_STORED_BYTES: int(1024, 16 * 1024 * 1024).default(64 * 1024),
    WORKER_CONCURRENCY: int(1, 256).default(8),
    // Which queues this worker process runs (issue 34): all by default. A comma list runs only those; WORKER_QUEUES_EXCEPT
    // leaves those out. Inbound files (hashing, decoding, disk writes) are worth a process of their own on a busy
    // host: in one process they share an event loop with intake's jobs, which then wait for it.
    WORKER_QUEUES: z.string().max(500).regex(/^[a-z, -]*$/, 'must be a comma-separated list of queue names').default(''),
    WORKER_QUEUES_EXCEPT: z.string().max(500).regex(/^[a-z, -]*$/, 'must be a comma-separated list of queue names').default(''),
    // Group commit of intake batches in a worker process (issue 20): transactions in flight per intake kind,
    // and the most messages one of them carries when queued batches are written together.
    INTAKE_WRITE_SLOTS: int(1, 256).default(2),
    INTAKE_WRITE_MAX_ITEMS: int(1, 10_000).default(256),
    // Bulk work (rollup folds, SLA and rollup sweeps) waits up to this long while live intake saturates the host.
    BACKGROUND_INTAKE_YIELD_MS: int(0, 60_000).default(2000),
    WORKER_METRICS_PUSH_MS: int(100, 600000).default(5000),
    AUDIT_RETENTION_DAYS: int(1, 36500).default(365),
    // Outbound events (issue 19): how long the log keeps them, and how a live stream tails it.
    EVENT_RETENTION_DAYS: int(1, 3650).default(30),
    EVENT_STREAM_POLL_MS: int(50, 60_000).default(500),
    EVENT_STREAM_HEARTBEAT_SECONDS: int(1, 300).default(15),
    // Live streams are bounded (issue 32): open streams per caller (API key, or user of an access token), per
    // workspace and per API process; how long a client may stay behind before its stream ends; how often an
    // idle stream checks its credential again; the largest event a frame carries (larger ones are references).
    EVENT_STREAMS_PER_CALLER: int(1, 100_000).default(10),
    EVENT_STREAMS_PER_WORKSPACE: int(1, 1_000_000).default(100),
    EVENT_STREAMS_PER_PROCESS: int(1, 1_000_000).default(1000),
    EVENT_STREAM_STALL_SECONDS: int(1, 3600).default(30),
    EVENT_STREAM_RECHECK_SECONDS: int(1, 300).default(5),
    EVENT_STREAM_MAX_EVENT_BYTES: int(1024, 16 * 1024 * 1024).default(64 * 1024),
    // Web chat both ways (issue 33): how long a visitor token lasts (the widget renews it by resuming), how long
    // an API process trusts what it read of a connection (a rotated inbound token ends sessions within this),
    // a visitor's reads per minute, and open visitor streams per visitor, per workspace and per API process.
    WEB_CHAT_SESSION_TTL_SECONDS: int(60, 90 * 86400).default(7 * 86400),
    WEB_CHAT_CONNECTION_CACHE_MS: int(0, 10_000).default(2000),
    WEB_CHAT_READ_RATE_POINTS: int(1, 1_000_000).default(600),
    WEB_CHAT_STREAMS_PER_VISITOR: int(1, 1000).default(3),
    WEB_CHAT_STREAMS_PER_WORKSPACE: int(1, 1_000_000).default(2000),
    WEB_CHAT_STREAMS_PER_PROCESS: int(1, 1_000_000).default(5000),
    PRESENCE_TTL_SECONDS: int(1, 86400).default(300),
    // How often overdue SLA targets are marked breached (one set-based sweep for every ticket; no per-ticket timers).
    SLA_SWEEP_SECONDS: int(1, 3600).default(10),
    THREAD_WINDOW_HOURS: int(1, 24 * 365).default(72),
    // Rendered ticket timelines kept per process for GET /v1/tickets/{id}, in MiB (0: none kept).
    TICKET_TIMELINE_CACHE_MB: int(0, 4096).default(32),
    INGEST_RATE_POINTS: int(1, 10_000_000).default(6000),
    INGEST_RATE_WINDOW_SECONDS: int(1, 86400).default(60),
    INGEST_BATCH_MAX: int(1, 1000).default(64),
    INGEST_BATCH_WINDOW_MS: int(0, 1000).default(2),
    WEBHOOK_BATCH_MAX: int(1, 1000).default(64),
    WEBHOOK_BATCH_WINDOW_MS: int(0, 1000).default(2),
    INGEST_ROUTE_CACHE_MS: int(0, 60000).default(5000),
    INGEST_MAX_MESSAGES_PER_REQUEST: int(1, 10_000).default(100),
    // Fair sharing of live intake (issue 21), per API process: a workspace's items queued to the workers at
    // once (0: no limit), and how many more may wait in its lane before it is answered 429.
    INTAKE_WORKSPACE_QUEUED: int(0, 100_000).default(32),
    INTAKE_WORKSPACE_WAITING: int(0, 1_000_000).default(256),
    // While the host's CPUs are saturated and other workspaces send intake too, a workspace may have only this
    // many items queued from one API process (its further requests wait in its lane; issue 21).
    INTAKE_WORKSPACE_SHARED_QUEUED: int(1, 100_000).default(2),
    // Refused intake requests (ingest and webhooks) per client address: refusals never touch a workspace's budget.
    INGEST_REFUSAL_RATE_POINTS: int(1, 10_000_000).default(120),
    INGEST_REFUSAL_RATE_WINDOW_SECONDS: int(1, 86400).default(60),
    MAX_INTEGRATIONS_PER_WORKSPACE: int(1, 100_000).default(20),
    AUTH_FAILURE_RATE_POINTS: int(1, 10_000_000).default(30),
    AUTH_FAILURE_WINDOW_SECONDS: int(1, 86400).default(60),
    WEBHOOK_RATE_POINTS: int(1, 10_000_000).default(6000),
    WEBHOOK_RATE_WINDOW_SECONDS: int(1, 86400).default(60),
    WEBHOOKS_REQUIRE_SIGNATURE: bool.default(false),
    OPS_USER: optionalString,
    OPS_PASSWORD: optionalString,
    HELP_CENTRE_BASE_DOMAIN: z.string().regex(/^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/, 'must be a lower-case DNS name').default('help.localhost.test'),
    SHUTDOWN_GRACE_MS: int(0, 600000).default(25000),
    // The help centre's article render pool (worker threads): its size, the time one render may take before
    // it is stopped (400 payload_too_complex), and how long a render may wait for a thread (503 past it).
    RENDER_THREADS: int(1, 64).default(2),
    RENDER_BUDGET_MS: int(50, 60000).default(700),
    RENDER_QUEUE_WAIT_MS: int(50, 60000).default(2000),
    ENCRYPTION_KEYS: encryptionKeys.prefault(DEV_ENCRYPTION_KEYS),
    // Mail providers (connected mailbox). Every base URL is configurable so a deployment can point at a
    // regional endpoint and the tests at a provider double on loopback.
    OAUTH_REDIRECT_URL: z.url().optional(),
    // How long a minted OAuth state may be completed. Providers' own codes live about ten minutes.
    OAUTH_STATE_TTL_SECONDS: int(1, 86400).default(600),
    GOOGLE_CLIENT_ID: optionalString,
    GOOGLE_CLIENT_SECRET: optionalString,
    GOOGLE_AUTH_URL: z.url().default('https://accounts.google.com/o/oauth2/v2/auth'),
    GOOGLE_TOKEN_URL: z.url().default('https://oauth2.googleapis.com/token'),
    GOOGLE_GMAIL_API_URL: z.url().default('https://gmail.googleapis.com'),
    MICROSOFT_CLIENT_ID: optionalString,
    MICROSOFT_CLIENT_SECRET: optionalString,
    MICROSOFT_AUTH_URL: z.url().default('https://login.microsoftonline.com/common/oauth2/v2.0/authorize'),
    MICROSOFT_TOKEN_URL: z.url().default('https://login.microsoftonline.com/common/oauth2/v2.0/token'),
    MICROSOFT_GRAPH_API_URL: z.url().default('https://graph.microsoft.com'),
    MAIL_PROVIDER_TIMEOUT_MS: int(100, 120000).default(10000),
    MAILBOX_REFRESH_SECONDS: int(60, 7 * 86400).default(3600),
    MAILBOX_POLL_SECONDS: int(10, 86400).default(60),
    MAILBOX_DAILY_SEND_LIMIT: int(1, 1_000_000).default(2000),
    OUTBOUND_ATTEMPTS: int(1, 20).default(5),
    // Replies on every channel (issue 33). Each provider's base URL defaults to its public API, so tests point
    // it at a double. A send that gets no answer within OUTBOUND_SEND_TIMEOUT_MS after its request may have
    // left ends `unknown`; a claim older than OUTBOUND_CLAIM_SECONDS (its worker died mid-send) too.
    POSTMARK_API_URL: z.url().default('https://api.postmarkapp.com'),
    TWILIO_API_URL: z.url().default('https://api.twilio.com'),
    WHATSAPP_API_URL: z.url().default('https://graph.facebook.com'),
    WHATSAPP_API_VERSION: z.string().regex(/^v\d{1,3}\.\d{1,3}$/, 'must look like v23.0').default('v23.0'),
    TELEGRAM_API_URL: z.url().default('https://api.telegram.org'),
    OUTBOUND_SEND_TIMEOUT_MS: int(100, 120000).default(10000),
    OUTBOUND_RETRY_BASE_MS: int(10, 3_600_000).default(2000),
    OUTBOUND_CLAIM_SECONDS: int(1, 86400).default(120),
    // Reply sends one worker process runs at once (they wait on providers, not on this process).
    OUTBOUND_CONCURRENCY: int(1, 512).default(32),
    // Which proxies' X-Forwarded-For to believe (Express's `trust proxy`): false, a hop count, or the proxies'
    // addresses and CIDRs (and Express's names loopback, linklocal, uniquelocal). `true` believes every hop,
    // so the left-most address, which a caller writes: refused in production.
    TRUST_PROXY: trustProxy.default(false),
    // Outbound webhooks (issue 19). http:// endpoints are refused unless this is on and the host is loopback.
    WEBHOOK_ALLOW_HTTP_LOOPBACK: bool.default(false),
    // Outbound webhooks to private networks (10/8, 192.168/16, link-local, fc00::/7 …) are refused unless set.
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: bool.default(false),
    WEBHOOK_SECRET_OVERLAP_SECONDS: int(0, 30 * 86400).default(86400),
    WEBHOOK_DELIVERY_TIMEOUT_MS: int(100, 120000).default(10000),
    // Hours a delivery is retried before it is marked failed; fractional so tests can use seconds.
    WEBHOOK_RETRY_HOURS: z.coerce.number().min(0.0001).max(30 * 24).default(72),
    WEBHOOK_RETRY_BASE_MS: int(10, 3_600_000).default(5000),
    WEBHOOK_DISABLE_AFTER_FAILURES: int(1, 100_000).default(20),
    WEBHOOK_ENDPOINT_CONCURRENCY: int(1, 64).default(16),
    // Fair sending across workspaces (issue 32): endpoints of one workspace sending at once (across worker
    // processes), endpoints a workspace may hold, and each endpoint's circuit breaker (failed attempts in a row
    // that open it, and the first wait before it is probed; doubling after each failed probe).
    WEBHOOK_WORKSPACE_CONCURRENCY: int(1, 1024).default(4),
    WEBHOOK_ENDPOINTS_PER_WORKSPACE: int(1, 100_000).default(20),
    WEBHOOK_CIRCUIT_FAILURES: int(1, 10_000).default(5),
    WEBHOOK_CIRCUIT_OPEN_SECONDS: z.coerce.number().min(0.1).max(86_400).default(30),
    WEBHOOK_DELIVERY_CONCURRENCY: int(1, 1024).default(32),
    WEBHOOK_SWEEP_MS: int(200, 3_600_000).default(30000),
    // The longest a sender waits before a round while live intake saturates the host's CPUs (0: never waits).
    WEBHOOK_INTAKE_YIELD_MS: int(0, 60_000).default(2000),
    // Optional virus scanning of attachments through clamd's INSTREAM over TCP (issue 34): no scanner when
    // CLAMAV_HOST is unset. The timeout bounds one whole scan (connecting, streaming the file, the answer).
    CLAMAV_HOST: optionalString,
    CLAMAV_PORT: int(1, 65535).default(3310),
    CLAMAV_TIMEOUT_MS: int(100, 600_000).default(30_000),
    // Attachments (issue 34). Bytes go to a directory on disk (FILES_DIR, relative to the working directory) unless
    // FILES_S3_BUCKET names an S3-compatible bucket. One file is at most FILES_MAX_BYTES; a workspace holds at most
    // FILES_WORKSPACE_QUOTA_BYTES; an upload's token is good for FILES_UPLOAD_TTL_SECONDS; a download from S3 is a
    // redirect to a URL presigned for FILES_S3_PRESIGN_SECONDS (0: the API streams the bytes itself).
    FILES_DIR: z.string().min(1).max(4096).default('data/files'),
    FILES_MAX_BYTES: int(1, 5 * 1024 * 1024 * 1024).default(25 * 1024 * 1024),
    FILES_UPLOAD_TTL_SECONDS: int(60, 7 * 86400).default(3600),
    FILES_WORKSPACE_QUOTA_BYTES: int(0, Number.MAX_SAFE_INTEGER).default(10 * 1024 * 1024 * 1024),
    FILES_S3_ENDPOINT: z.url().optional(),
    FILES_S3_BUCKET: optionalString.pipe(z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be an S3 bucket name').optional()),
    FILES_S3_REGION: z.string().min(1).max(64).default('us-east-1'),
    FILES_S3_ACCESS_KEY_ID: optionalString,
    FILES_S3_SECRET_ACCESS_KEY: optionalString,
    FILES_S3_FORCE_PATH_STYLE: bool.default(false),
    FILES_S3_PRESIGN_SECONDS: int(0, 7 * 86400).default(0),
    // Inbound files (issue 34): files one customer message may bring (the rest are listed as skipped), downloads
    // one worker process runs at once, the time one file may take (provider lookup and download together), and
    // the hosts besides TWILIO_API_URL's own a Twilio MediaUrl may name (`*.` for any subdomain): a MediaUrl
    // anywhere else is never fetched (it comes from the payload, and the account's credentials go with it).
    FILES_MAX_PER_MESSAGE: int(1, 100).default(20),
    // The largest inbound email body (POST /v1/hooks/email/…, POST /v1/ingest/email) with its files inside the
    // JSON as base64: Postmark takes mail up to 35 MB, which its JSON carries in about 48 MB. Over BODY_LIMIT_BYTES
    // it is read as it arrives and the files' text goes straight to the file store (src/lib/spooled-json.ts).
    INGEST_EMAIL_MAX_BYTES: int(1024, 1024 * 1024 * 1024).default(50 * 1024 * 1024),
    FILES_FETCH_CONCURRENCY: int(1, 256).default(8),
    FILES_FETCH_TIMEOUT_MS: int(100, 600_000).default(60_000),
    TWILIO_MEDIA_HOSTS: z.string().max(2048).regex(/^[a-z0-9.*,\s-]*$/i, 'must be a comma-separated list of host names (*.example.com for subdomains)').default('api.twilio.com,*.twilio.com'),
  })
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
      ...(c.WEBHOOK_ALLOW_HTTP_LOOPBACK ? ['WEBHOOK_ALLOW_HTTP_LOOPBACK=true (webhook endpoints on http:// loopback, this host\'s own ports)'] : []),
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

/** Every variable the service reads (optional ones included). */
export const CONFIG_KEYS = Object.keys(schema.shape) as (keyof Config)[];

/**
 * The configuration in sections, one per concern: a factory is handed the sections it needs (`section`),
 * never the whole config, so what each part of the service can read is visible in its type. Every variable
 * belongs to exactly one section (test/config.test.ts).
 */
export const CONFIG_SECTIONS = {
  runtime: ['NODE_ENV', 'LOG_LEVEL', 'SHUTDOWN_GRACE_MS'],
  http: ['PORT', 'HOST', 'PUBLIC_BASE_URL', 'BODY_LIMIT_BYTES', 'TRUST_PROXY', 'JOB_WAIT_MS', 'IDEMPOTENCY_TTL_SECONDS', 'IDEMPOTENCY_MAX_STORED_BYTES', 'API_RATE_POINTS', 'WORKSPACE_RATE_POINTS', 'API_RATE_WINDOW_SECONDS'],
  db: ['DATABASE_URL', 'PG_POOL_MAX', 'PG_CONNECT_TIMEOUT_MS', 'PG_STATEMENT_TIMEOUT_MS', 'DATABASE_POOL_MODE', 'DATABASE_LISTEN_URL', 'DATABASE_READ_URL', 'DATABASE_READ_MAX_LAG_MS'],
  redis: ['REDIS_URL', 'REDIS_PREFIX', 'REDIS_CLUSTER_NODES', 'INTAKE_QUEUE_SHARDS'],
  secrets: ['API_KEY_PEPPER', 'ENCRYPTION_KEYS'],
  identity: [
    'API_KEY_TOUCH_INTERVAL_SECONDS',
    'REALM_JWKS_URL',
    'REALM_PUBLIC_KEY',
    'REALM_ISSUER',
    'REALM_AUDIENCE',
    'REALM_ALGORITHMS',
    'AUTH_FAILURE_RATE_POINTS',
    'AUTH_FAILURE_WINDOW_SECONDS',
  ],
  workers: ['SLA_SWEEP_SECONDS', 'WORKER_CONCURRENCY', 'WORKER_QUEUES', 'WORKER_QUEUES_EXCEPT', 'OUTBOUND_CONCURRENCY', 'INTAKE_WRITE_SLOTS', 'INTAKE_WRITE_MAX_ITEMS', 'BACKGROUND_INTAKE_YIELD_MS', 'WORKER_METRICS_PUSH_MS', 'AUDIT_RETENTION_DAYS'],
  tickets: ['PRESENCE_TTL_SECONDS', 'THREAD_WINDOW_HOURS', 'TICKET_TIMELINE_CACHE_MB'],
  events: [
    'EVENT_RETENTION_DAYS',
    'EVENT_STREAM_POLL_MS',
    'EVENT_STREAM_HEARTBEAT_SECONDS',
    'EVENT_STREAMS_PER_CALLER',
    'EVENT_STREAMS_PER_WORKSPACE',
    'EVENT_STREAMS_PER_PROCESS',
    'EVENT_STREAM_STALL_SECONDS',
    'EVENT_STREAM_RECHECK_SECONDS',
    'EVENT_STREAM_MAX_EVENT_BYTES',
  ],
  webChat: [
    'WEB_CHAT_SESSION_TTL_SECONDS',
    'WEB_CHAT_CONNECTION_CACHE_MS',
    'WEB_CHAT_READ_RATE_POINTS',
    'WEB_CHAT_STREAMS_PER_VISITOR',
    'WEB_CHAT_STREAMS_PER_WORKSPACE',
    'WEB_CHAT_STREAMS_PER_PROCESS',
  ],
  intake: [
    'INGEST_RATE_POINTS',
    'INGEST_RATE_WINDOW_SECONDS',
    'INGEST_BATCH_MAX',
    'INGEST_BATCH_WINDOW_MS',
    'INGEST_ROUTE_CACHE_MS',
    'INGEST_MAX_MESSAGES_PER_REQUEST',
    'INTAKE_WORKSPACE_QUEUED',
    'INTAKE_WORKSPACE_WAITING',
    'INTAKE_WORKSPACE_SHARED_QUEUED',
    'INGEST_REFUSAL_RATE_POINTS',
    'INGEST_REFUSAL_RATE_WINDOW_SECONDS',
  ],
  webhooks: ['WEBHOOK_BATCH_MAX', 'WEBHOOK_BATCH_WINDOW_MS', 'WEBHOOK_RATE_POINTS', 'WEBHOOK_RATE_WINDOW_SECONDS', 'WEBHOOKS_REQUIRE_SIGNATURE', 'MAX_INTEGRATIONS_PER_WORKSPACE'],
  mailbox: [
    'OAUTH_REDIRECT_URL',
    'OAUTH_STATE_TTL_SECONDS',
    'GOOGLE_CLIENT_ID',
    'GOOGLE_CLIENT_SECRET',
    'GOOGLE_AUTH_URL',
    'GOOGLE_TOKEN_URL',
    'GOOGLE_GMAIL_API_URL',
    'MICROSOFT_CLIENT_ID',
    'MICROSOFT_CLIENT_SECRET',
    'MICROSOFT_AUTH_URL',
    'MICROSOFT_TOKEN_URL',
    'MICROSOFT_GRAPH_API_URL',
    'MAIL_PROVIDER_TIMEOUT_MS',
    'MAILBOX_REFRESH_SECONDS',
    'MAILBOX_POLL_SECONDS',
    'MAILBOX_DAILY_SEND_LIMIT',
  ],
  outbound: [
    'POSTMARK_API_URL',
    'TWILIO_API_URL',
    'WHATSAPP_API_URL',
    'WHATSAPP_API_VERSION',
    'TELEGRAM_API_URL',
    'OUTBOUND_SEND_TIMEOUT_MS',
    'OUTBOUND_RETRY_BASE_MS',
    'OUTBOUND_CLAIM_SECONDS',
    'OUTBOUND_ATTEMPTS',
  ],
  helpCentre: ['HELP_CENTRE_BASE_DOMAIN', 'RENDER_THREADS', 'RENDER_BUDGET_MS', 'RENDER_QUEUE_WAIT_MS'],
  ops: ['OPS_USER', 'OPS_PASSWORD'],
  outboundWebhooks: [
    'WEBHOOK_ALLOW_HTTP_LOOPBACK',
    'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
    'WEBHOOK_SECRET_OVERLAP_SECONDS',
    'WEBHOOK_DELIVERY_TIMEOUT_MS',
    'WEBHOOK_RETRY_HOURS',
    'WEBHOOK_RETRY_BASE_MS',
    'WEBHOOK_DISABLE_AFTER_FAILURES',
    'WEBHOOK_ENDPOINT_CONCURRENCY',
    'WEBHOOK_WORKSPACE_CONCURRENCY',
    'WEBHOOK_ENDPOINTS_PER_WORKSPACE',
    'WEBHOOK_CIRCUIT_FAILURES',
    'WEBHOOK_CIRCUIT_OPEN_SECONDS',
    'WEBHOOK_DELIVERY_CONCURRENCY',
    'WEBHOOK_SWEEP_MS',
    'WEBHOOK_INTAKE_YIELD_MS',
  ],
  scanning: ['CLAMAV_HOST', 'CLAMAV_PORT', 'CLAMAV_TIMEOUT_MS'],
  files: [
    'FILES_DIR',
    'FILES_MAX_BYTES',
    'FILES_UPLOAD_TTL_SECONDS',
    'FILES_WORKSPACE_QUOTA_BYTES',
    'FILES_S3_ENDPOINT',
    'FILES_S3_BUCKET',
    'FILES_S3_REGION',
    'FILES_S3_ACCESS_KEY_ID',
    'FILES_S3_SECRET_ACCESS_KEY',
    'FILES_S3_FORCE_PATH_STYLE',
    'FILES_S3_PRESIGN_SECONDS',
  ],
  inboundFiles: ['FILES_MAX_PER_MESSAGE', 'INGEST_EMAIL_MAX_BYTES', 'FILES_FETCH_CONCURRENCY', 'FILES_FETCH_TIMEOUT_MS', 'TWILIO_MEDIA_HOSTS'],
} as const satisfies Record<string, readonly (keyof Config)[]>;

export type SectionName = keyof typeof CONFIG_SECTIONS;
/** The variables of the named sections, and nothing else. */
export type ConfigSection<S extends SectionName> = Pick<Config, (typeof CONFIG_SECTIONS)[S][number]>;

/** A copy of `config` holding only the named sections' variables. */
export function section<S extends SectionName>(config: Config, ...names: S[]): ConfigSection<S> {
  const keys = names.flatMap((n) => CONFIG_SECTIONS[n] as readonly (keyof Config)[]);
  return Object.fromEntries(keys.map((k) => [k, config[k]])) as ConfigSection<S>;
}

export class ConfigError extends Error {}

/** Parses an environment into a typed config; the error message names the first offending variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const result = schema.safeParse(env);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const name = String(issue.path[0] ?? 'environment');
    const raw = env[name];
    const shown = raw === undefined || /PEPPER|KEY|SECRET|PASSWORD/.test(name) ? '' : ` (got "${raw}")`;
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
