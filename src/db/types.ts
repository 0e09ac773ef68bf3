import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
type UpdatedAt = ColumnType<Date, Date | string | undefined, Date | string>;

export type Role = 'viewer' | 'editor' | 'admin' | 'owner';
/** `invited`: added by email, bound to no realm subject yet; cannot act until the person signs in. */
export type MemberStatus = 'active' | 'deactivated' | 'invited';

export interface TenantsTable {
  id: string;
  name: string;
  region: ColumnType<'us' | 'eu' | 'ap', 'us' | 'eu' | 'ap' | undefined, 'us' | 'eu' | 'ap'>;
  default_model: ColumnType<string | null, string | null | undefined, string | null>;
  default_embedding_model: ColumnType<string | null, string | null | undefined, string | null>;
  /** numeric(14,2): read as a string, exact. */
  daily_usd_cap: ColumnType<string | null, string | null | undefined, string | null>;
  monthly_usd_cap: ColumnType<string | null, string | null | undefined, string | null>;
  deployment_mode: ColumnType<'shared' | 'dedicated' | 'self_hosted', 'shared' | 'dedicated' | 'self_hosted' | undefined, 'shared' | 'dedicated' | 'self_hosted'>;
  onboarding: ColumnType<Record<string, unknown>, string | undefined, string>;
  /** The IANA zone the workspace's report days are cut in (0042); UTC unless set. */
  time_zone: ColumnType<string, string | undefined, string>;
  /** Solved and closed tickets older than this many days have their conversation erased (0043); null: off. */
  retention_days: ColumnType<number | null, number | null | undefined, number | null>;
  /** Bumped by a trigger on every update: the settings' strong ETag. */
  version: ColumnType<number, never, never>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface HelpCentresTable {
  id: string;
  tenant_id: string;
  name: string;
  default_locale: string;
  locales: string[];
  enabled: ColumnType<boolean, boolean | undefined, boolean>;
  brand: ColumnType<Record<string, string>, string | undefined, string>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface HelpCentreHostsTable {
  tenant_id: string;
  help_centre_id: string;
  subdomain_label: string;
  full_host: string;
  is_primary: boolean;
  verified_at: Date | null;
  created_at: CreatedAt;
}

type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface HelpArticlesTable {
  id: string;
  tenant_id: string;
  help_centre_id: string;
  source_article_id: string;
  created_at: CreatedAt;
}

export interface HelpArticleTranslationsTable {
  id: string;
  tenant_id: string;
  help_centre_id: string;
  article_id: string;
  locale: string;
  visibility: Defaulted<string>;
  editorial_state: Defaulted<string>;
  title: Defaulted<string>;
  slug: Defaulted<string>;
  excerpt: Defaulted<string>;
  container_path: Defaulted<string[]>;
  position: Defaulted<number>;
  promoted: Defaulted<boolean>;
  source_status_raw: Defaulted<string>;
  source_visibility_raw: ColumnType<Record<string, unknown>, string | undefined, string>;
  permission_group_id: Defaulted<string>;
  user_segment_ids: Defaulted<string[]>;
  labels: Defaulted<string[]>;
  author_label: Defaulted<string>;
  source_url: Defaulted<string>;
  source_created_at: Date | null;
  source_updated_at: Date | null;
  published_at: Date | null;
  vote_count: Defaulted<number>;
  vote_sum: Defaulted<number>;
  noindex: Defaulted<boolean>;
  body_source_html: Defaulted<string>;
  body_html: Defaulted<string>;
  body_markdown: Defaulted<string>;
  body_format: Defaulted<string>;
  sanitizer_version: Defaulted<string>;
  sanitize_report: ColumnType<Record<string, unknown>, string | undefined, string>;
  link_report: ColumnType<Record<string, unknown>, string | undefined, string>;
  asset_report: ColumnType<Record<string, unknown>, string | undefined, string>;
  missing_at_source_at: Date | null;
  locally_edited_at: Date | null;
  has_conflict: Defaulted<boolean>;
  conflict_seen_at: Date | null;
  pending: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
  /** Bumped by a trigger on every update: the translation's strong ETag. */
  version: ColumnType<number, never, never>;
}

export interface TenantProviderKeysTable {
  tenant_id: string;
  provider: string;
  key_sealed: string;
  updated_at: UpdatedAt;
}

/**
 * A person as one workspace's invitation named them. `realm_subject` and the email are not unique and not
 * read for sign-in: the binding of a realm subject lives on the membership.
 */
export interface UsersTable {
  id: string;
  email: string;
  name: string;
  realm_subject: string | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export type Presence = 'online' | 'away' | 'offline';

export interface MembershipsTable {
  tenant_id: string;
  user_id: string;
  role: Role;
  status: MemberStatus;
  /** The realm subject bound to this person in this workspace (unique per workspace); null while invited. */
  realm_subject: ColumnType<string | null, string | null | undefined, string | null>;
  presence: ColumnType<Presence, Presence | undefined, Presence>;
  presence_at: ColumnType<Date | null, Date | null | undefined, Date | string | null>;
  helpdesk_unavailable: ColumnType<boolean, boolean | undefined, boolean>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface AgentsTable {
  id: string;
  tenant_id: string;
  name: string;
  created_at: CreatedAt;
}

export interface ApiKeysTable {
  id: string;
  tenant_id: string;
  created_by_user_id: string;
  name: string;
  prefix: string;
  secret_hash: Buffer;
  scopes: string[];
  expires_at: Date | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
  created_at: CreatedAt;
}

export interface AuditLogTable {
  id: string;
  tenant_id: string;
  actor_user_id: string | null;
  actor_api_key_id: string | null;
  action: string;
  target_type: string;
  target_id: string | null;
  details: ColumnType<Record<string, unknown>, string, string>;
  created_at: CreatedAt;
  seq: Generated<string>;
}

export interface CustomersTable {
  id: string;
  tenant_id: string;
  display_name: string;
  email: string;
  company: string;
  country: string;
  metadata: ColumnType<Record<string, unknown>, string, string>;
  /** Bumped by a trigger on every update (0043): the customer's strong ETag. */
  version: ColumnType<number, never, never>;
  phone: ColumnType<string, string | undefined, string>;
  notes: ColumnType<string, string | undefined, string>;
  locale: ColumnType<string, string | undefined, string>;
  time_zone: ColumnType<string, string | undefined, string>;
  /** Set when the person was erased: the row keeps only its id and timestamps. */
  erased_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

/** Where a merged-away (deleted) customer went (0043): reads of its id answer the survivor's. */
export interface CustomerMergesTable {
  tenant_id: string;
  id: string;
  merged_into_id: string;
  merged_at: CreatedAt;
}

/** One export or erasure of a customer (0043): what the job works from and what a client polls. */
export interface CustomerJobsTable {
  tenant_id: string;
  id: string;
  customer_id: string;
  kind: 'export' | 'erase';
  state: ColumnType<'queued' | 'done' | 'failed', 'queued' | 'done' | 'failed' | undefined, 'queued' | 'done' | 'failed'>;
  reason: ColumnType<string, string | undefined, string>;
  requested_by_user_id: string | null;
  requested_by_api_key_id: string | null;
  file_key: ColumnType<string | null, string | null | undefined, string | null>;
  file_bytes: ColumnType<string | null, number | null | undefined, number | null>;
  expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  error: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  completed_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface TeamsTable {
  id: string;
  tenant_id: string;
  name: string;
  rr_last_position: ColumnType<number, number | undefined, number>;
  created_at: CreatedAt;
}

export interface TeamMembersTable {
  tenant_id: string;
  team_id: string;
  user_id: string;
  position: number;
  created_at: CreatedAt;
}

export interface SavedViewsTable {
  id: string;
  tenant_id: string;
  owner_user_id: string;
  name: string;
  filters: ColumnType<Record<string, string>, string, string>;
  shared: boolean;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface MacrosTable {
  id: string;
  tenant_id: string;
  name: string;
  description: string;
  actions: ColumnType<unknown[], string, string>;
  enabled: boolean;
  trigger: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  created_by_user_id: string | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
  /** Bumped by a trigger on every update: the macro's strong ETag. */
  version: ColumnType<number, never, never>;
}

export interface MacroRunsTable {
  tenant_id: string;
  macro_id: string;
  event_id: string;
  created_at: CreatedAt;
}

/** One firing of a time rule per (rule, ticket, stretch): the stretch is the anchor's value it counted from (0041). */
export interface TimeRuleFiringsTable {
  tenant_id: string;
  macro_id: string;
  ticket_id: string;
  stretch: Date;
  fired_at: CreatedAt;
}

export interface NotificationsTable {
  id: string;
  tenant_id: string;
  user_id: string;
  kind: string;
  ticket_id: string | null;
  body: string;
  meta: ColumnType<Record<string, unknown>, string, string>;
  read_at: Date | null;
  created_at: CreatedAt;
}

export interface SlaPoliciesTable {
  id: string;
  tenant_id: string;
  name: string;
  is_default: boolean;
  targets: ColumnType<SlaTargetsJson, string, string>;
  /** The schedule its targets count business minutes on (0040); null: calendar minutes. */
  schedule_id: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
}

export type SlaTargetsJson = Record<'low' | 'normal' | 'high' | 'urgent', { first_response_minutes: number; resolution_minutes: number; next_reply_minutes?: number }>;

/** Business hours (0040): a zone, weekly hours and holidays; `weekly` is seven arrays, Monday first, of [start, end) local minutes. */
export interface SchedulesTable {
  tenant_id: string;
  id: string;
  name: string;
  time_zone: string;
  weekly: ColumnType<[number, number][][], string, string>;
  /** Local dates (`YYYY-MM-DD`, read as text) an admin typed in. */
  holidays: ColumnType<string[], string[] | undefined, string[]>;
  ical_url: ColumnType<string | null, string | null | undefined, string | null>;
  /** Local dates the iCal feed gave at its last good read. */
  ical_holidays: ColumnType<string[], string[] | undefined, string[]>;
  ical_fetched_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  ical_error: ColumnType<string | null, string | null | undefined, string | null>;
  /** Bumped by a trigger on every update: the schedule's strong ETag. */
  version: ColumnType<number, never, never>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export type TicketStatus = 'open' | 'pending' | 'on_hold' | 'solved' | 'closed' | 'spam' | 'merged';

export interface TicketsTable {
  id: string;
  tenant_id: string;
  subject: string;
  description: string;
  status: TicketStatus;
  priority: 'low' | 'normal' | 'high' | 'urgent';
  source: string;
  customer_id: string;
  assignee_id: string | null;
  team_id: string | null;
  tags: string[];
  metadata: ColumnType<Record<string, unknown>, string, string>;
  sla_policy_id: string;
  first_response_due: Date;
  resolution_due: Date;
  first_response_breached_at: Date | null;
  resolution_breached_at: Date | null;
  sla_breached: ColumnType<boolean, never, never>;
  first_responded_at: Date | null;
  solved_at: Date | null;
  reopened_at: Date | null;
  merged_into_id: string | null;
  conversation_key: ColumnType<string | null, string | null | undefined, string | null>;
  /** When the ticket entered its status (0041): set by every status change, reopen and merge. */
  status_entered_at: ColumnType<Date, Date | string | undefined, Date | string>;
  /** The customer's latest inbound message (0041), the one that opened the ticket included. */
  last_customer_message_at: Date | null;
  /** An agent's latest reply (0041); internal notes do not count. */
  last_agent_reply_at: Date | null;
  /** When the conversation's text was erased (retention or the customer's erasure; 0043). */
  content_erased_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** The next-reply target (0040): due from the first customer message after an agent reply (`next_reply_from`), met by the next reply. */
  next_reply_due: ColumnType<Date | null, Date | null | undefined, Date | null>;
  next_reply_from: ColumnType<Date | null, Date | null | undefined, Date | null>;
  next_reply_breached_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** The resolution clock stopped in pending / on_hold on a business-time policy (0040), with the minutes it had left. */
  resolution_paused_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  resolution_remaining_minutes: ColumnType<number | null, number | null | undefined, number | null>;
  /** Where the resolution clock runs from after its last pause, and the minutes it had counted before it (0040). */
  resolution_resumed_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  resolution_elapsed_minutes: ColumnType<number, number | undefined, number>;
  /** Bumped by a trigger on every update: the ticket's strong ETag. */
  version: ColumnType<number, never, never>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface TicketEventsTable {
  id: string;
  seq: Generated<string>;
  tenant_id: string;
  ticket_id: string;
  kind: string;
  body: string;
  meta: ColumnType<Record<string, unknown>, string, string>;
  actor_type: 'customer' | 'user' | 'system' | 'agent';
  actor_user_id: string | null;
  actor_name: string | null;
  created_at: CreatedAt;
  /** When the event's text was removed (redaction, erasure, retention; 0043). */
  redacted_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

/**
 * Ticket search (0038): one document per ticket, kept by the search_* triggers in the transaction of every write
 * (never written by the service's code). `doc` is a tsvector, read only inside search statements.
 */
export interface TicketSearchTable {
  tenant_id: string;
  ticket_id: string;
  doc: ColumnType<string, never, never>;
}

export interface TimeEntriesTable {
  id: string;
  tenant_id: string;
  ticket_id: string;
  user_id: string | null;
  team_id: string | null;
  minutes: number;
  billable: boolean;
  worked_on: string | null;
  created_at: CreatedAt;
}

export interface TodosTable {
  id: string;
  tenant_id: string;
  ticket_id: string;
  title: string;
  assignee_id: string | null;
  due_at: Date | null;
  done_at: Date | null;
  created_at: CreatedAt;
}

export interface CustomerCountsTable {
  tenant_id: string;
  shard: number;
  n: number;
}

export interface ChannelConnectionsTable {
  tenant_id: string;
  channel: string;
  display_name: string;
  enabled: boolean;
  config: ColumnType<Record<string, unknown>, string, string>;
  inbound_token_hash: Buffer;
  /** The inbound token sealed (a status callback URL must name it); null for connections made before 0034. */
  inbound_token_sealed: ColumnType<string | null, string | null | undefined, string | null>;
  /** The channel's credentials (server_token, auth_token, api_key, bot_token …), sealed; never in `config`. */
  secrets_sealed: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface IngestDeliveriesTable {
  tenant_id: string;
  channel: string;
  provider_message_id: string;
  first_correlation_id: string;
  ticket_id: string | null;
  customer_id: string | null;
  was_created: ColumnType<boolean, boolean | undefined, boolean>;
  duplicate_count: ColumnType<number, number | undefined, number>;
  first_seen_at: CreatedAt;
  /** Arrival order, the deliveries list's page key (identity column). */
  seq: Generated<string>;
  last_seen_at: UpdatedAt;
}

export interface OauthStatesTable {
  state_hash: Buffer;
  tenant_id: string;
  user_id: string;
  provider: string;
  expires_at: Date;
  used_at: Date | null;
  created_at: CreatedAt;
}

export interface MailboxesTable {
  tenant_id: string;
  provider: string;
  email_address: string;
  scopes: string[];
  access_token_sealed: string;
  refresh_token_sealed: string | null;
  access_expires_at: Date;
  connected: ColumnType<boolean, boolean | undefined, boolean>;
  sendable: ColumnType<boolean, boolean | undefined, boolean>;
  polling: ColumnType<boolean, boolean | undefined, boolean>;
  inbound_cursor: string | null;
  checks: ColumnType<MailboxCheck[], string | undefined, string>;
  connected_at: ColumnType<Date, Date | undefined, Date>;
  healthy_at: Date | null;
  last_polled_at: Date | null;
  last_checked_at: Date | null;
  updated_at: UpdatedAt;
}

export type OutboundState = 'queued' | 'sending' | 'sent' | 'delivered' | 'read' | 'failed' | 'blocked' | 'unknown';

export interface OutboundMessagesTable {
  tenant_id: string;
  event_id: string;
  ticket_id: string;
  channel: ColumnType<string, string | undefined, string>;
  state: ColumnType<OutboundState, OutboundState | undefined, OutboundState>;
  sender: string | null;
  recipient: string | null;
  message_id: string | null;
  provider_message_id: string | null;
  attempts: ColumnType<number, number | undefined, number>;
  last_error: string | null;
  error_code: string | null;
  segments: number | null;
  template: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  /** The parts of a reply sent in several provider messages that the provider acknowledged (migration 0036). */
  parts: ColumnType<{ index: number; provider_message_id: string }[], string | undefined, string>;
  claimed_at: Date | null;
  next_attempt_at: Date | null;
  sent_at: Date | null;
  delivered_at: Date | null;
  read_at: Date | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface IntegrationsTable {
  id: string;
  tenant_id: string;
  provider: 'zendesk' | 'front' | 'helpscout';
  name: string;
  signing_secret_sealed: string | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface TranscriptsTable {
  id: string;
  tenant_id: string;
  integration_id: string;
  external_ticket_id: string;
  event_count: ColumnType<number, number | undefined, number>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface TranscriptEventsTable {
  id: string;
  seq: Generated<string>;
  tenant_id: string;
  transcript_id: string;
  provider_event_id: string | null;
  type: string;
  occurred_at: Date | null;
  status: string | null;
  subject: string | null;
  priority: string | null;
  requester: string | null;
  raw: ColumnType<unknown, string, string>;
  received_at: CreatedAt;
}

export interface WebhookDeliveriesTable {
  tenant_id: string;
  integration_id: string;
  dedupe_key: string;
  first_correlation_id: string;
  transcript_id: string | null;
  external_ticket_id: string | null;
  duplicate_count: ColumnType<number, number | undefined, number>;
  first_seen_at: CreatedAt;
}

export interface EventsTable {
  tenant_id: string;
  id: string;
  /** Commit order within the workspace, set at commit (migration 0023); null only inside the writing transaction. */
  position: ColumnType<string | null, never, never>;
  type: string;
  occurred_at: CreatedAt;
  ticket_id: string | null;
  data: ColumnType<unknown, string, string>;
  /** UTF-8 bytes of `data` as JSON, written at insert (0032); null on rows written before. */
  data_bytes: ColumnType<number | null, number | undefined, never>;
}

export interface WebhookEndpointsTable {
  tenant_id: string;
  id: string;
  url: string;
  description: ColumnType<string, string | undefined, string>;
  event_types: string[];
  enabled: ColumnType<boolean, boolean | undefined, boolean>;
  secret_sealed: string;
  previous_secret_sealed: ColumnType<string | null, string | null | undefined, string | null>;
  previous_secret_expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** The endpoint's cursor in the events log: every event of its types at or below it was sent or parked (0025). */
  sent_through: ColumnType<string, string | undefined, string>;
  consecutive_failures: ColumnType<number, number | undefined, number>;
  disabled_reason: ColumnType<'admin' | 'failures' | null, 'admin' | 'failures' | null | undefined, 'admin' | 'failures' | null>;
  /** The worker sending for the endpoint now, and until when its lease holds (migration 0025). */
  sender_token: ColumnType<string | null, string | null | undefined, string | null>;
  sender_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** A wake-up found the lease held: its holder sends another round before letting go. */
  sender_wanted: ColumnType<boolean, boolean | undefined, boolean>;
  /** The circuit breaker (0033): failed attempts in a row, how often it opened since a delivery, and until when it is open. */
  circuit_failures: ColumnType<number, number | undefined, number>;
  circuit_opens: ColumnType<number, number | undefined, number>;
  circuit_open_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** Since when the endpoint waits for one of its workspace's sender slots (0033); null when it does not. */
  slot_wanted_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export type EventDeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface EventDeliveriesTable {
  tenant_id: string;
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  position: string;
  ordering_key: string;
  status: ColumnType<EventDeliveryStatus, EventDeliveryStatus | undefined, EventDeliveryStatus>;
  attempts: ColumnType<number, number | undefined, number>;
  window_started_at: ColumnType<Date, Date | undefined, Date>;
  next_attempt_at: ColumnType<Date, Date | undefined, Date>;
  lease_until: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface EventDeliveryAttemptsTable {
  tenant_id: string;
  seq: Generated<string>;
  id: string;
  endpoint_id: string;
  delivery_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  outcome: 'delivered' | 'retrying' | 'failed';
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  next_retry_at: Date | null;
  created_at: CreatedAt;
}

export interface CsatResponsesTable {
  id: string;
  tenant_id: string;
  ticket_id: string;
  assignee_id: string | null;
  score: number;
  comment: ColumnType<string, string | undefined, string>;
  created_by_user_id: string | null;
  created_at: CreatedAt;
}

export interface RollupJournalTable {
  id: Generated<string>;
  tenant_id: string;
  kind: 'time' | 'csat';
  day: string;
  user_id: string | null;
  team_id: string | null;
  worked_on: string | null;
  billable: boolean | null;
  score: number | null;
  entries: number;
  minutes: number;
}

/** Per ticket, what it contributes to the reports now (0042): diffed by every write, the difference journaled. */
export interface ReportTicketsTable {
  tenant_id: string;
  ticket_id: string;
  team_id: string | null;
  agent_id: string | null;
  channel: string;
  priority: string;
  created_at: Date;
  first_reply_at: Date | null;
  frt_minutes: number | null;
  frt_business: number | null;
  replies: number;
  reopens: number;
  resolved_at: Date | null;
  res_minutes: number | null;
  res_business: number | null;
  sla_first_at: Date | null;
  sla_first_met: boolean | null;
  sla_res_met: boolean | null;
}

/** A report fact's signed delta not yet folded into report_days (0042). */
export interface ReportJournalTable {
  id: Generated<string>;
  tenant_id: string;
  at: Date;
  metric: string;
  team_id: string | null;
  agent_id: string | null;
  channel: string;
  priority: string;
  bucket: number | null;
  n: number;
  v: ColumnType<string, number | string | undefined, number | string>;
}

/** The zone a workspace's report days are cut in (0042); swapped with the days by a re-bucketing. */
export interface ReportZonesTable {
  tenant_id: string;
  zone: string;
  built_at: CreatedAt;
}

export interface MailboxCheck {
  check: 'oauth_token' | 'scopes' | 'send_permission' | 'inbound_polling' | 'daily_send_quota';
  status: 'ok' | 'warning' | 'failing' | 'unknown';
  detail: string;
  remediation: string;
  last_checked_at: string;
}

export interface CustomerHandlesTable {
  tenant_id: string;
  kind: string;
  handle: string;
  customer_id: string;
  /** Set when a provider said the handle cannot be reached (Telegram: the bot was blocked). */
  unreachable_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  unreachable_reason: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface EmailMessageIdsTable {
  tenant_id: string;
  message_id: string;
  ticket_id: string;
  created_at: CreatedAt;
}

/** Routing rows (0029): a key a request carries, mapped to its workspace. */
export interface RoutesTable {
  kind: string;
  key: string;
  tenant_id: string;
}

/** Attachments (issue 34, migration 0035): a file's metadata; its bytes are in the blob store under `storage_key`. */
export type AttachmentStateColumn = 'pending' | 'stored' | 'skipped' | 'failed' | 'infected';

export interface AttachmentsTable {
  tenant_id: string;
  id: string;
  ticket_id: string | null;
  event_id: string | null;
  upload_token_hash: string | null;
  name: string;
  content_type: string;
  /** bigint, read as a number (src/db/index.ts parses int8). */
  size: ColumnType<number, number | undefined, number>;
  sha256: string | null;
  storage_key: string;
  state: AttachmentStateColumn;
  reason: string | null;
  content_id: string | null;
  source: 'upload' | 'inbound';
  internal: ColumnType<boolean, boolean | undefined, boolean>;
  uploaded_by: string | null;
  /** A web chat visitor's upload (migration 0037): their visitor id; `uploaded_by` is then null. */
  uploaded_by_visitor: ColumnType<string | null, string | null | undefined, string | null>;
  expires_at: Date | null;
  created_at: CreatedAt;
  stored_at: Date | null;
}

/** Each workspace's bytes held in the blob store (kept by a trigger on attachments), for the quota. */
export interface FileUsageTable {
  tenant_id: string;
  bytes: ColumnType<number, number | undefined, number>;
  quota_reached_at: Date | null;
}

export interface Database {
  tenants: TenantsTable;
  routes: RoutesTable;
  users: UsersTable;
  memberships: MembershipsTable;
  agents: AgentsTable;
  api_keys: ApiKeysTable;
  audit_log: AuditLogTable;
  customers: CustomersTable;
  customer_counts: CustomerCountsTable;
  channel_connections: ChannelConnectionsTable;
  ingest_deliveries: IngestDeliveriesTable;
  events: EventsTable;
  webhook_endpoints: WebhookEndpointsTable;
  event_deliveries: EventDeliveriesTable;
  event_delivery_attempts: EventDeliveryAttemptsTable;
  customer_handles: CustomerHandlesTable;
  customer_jobs: CustomerJobsTable;
  customer_merges: CustomerMergesTable;
  oauth_states: OauthStatesTable;
  mailboxes: MailboxesTable;
  outbound_messages: OutboundMessagesTable;
  integrations: IntegrationsTable;
  transcripts: TranscriptsTable;
  transcript_events: TranscriptEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  csat_responses: CsatResponsesTable;
  rollup_journal: RollupJournalTable;
  report_tickets: ReportTicketsTable;
  report_journal: ReportJournalTable;
  report_zones: ReportZonesTable;
  tenant_provider_keys: TenantProviderKeysTable;
  help_centres: HelpCentresTable;
  help_centre_hosts: HelpCentreHostsTable;
  help_article_translations: HelpArticleTranslationsTable;
  help_articles: HelpArticlesTable;
  email_message_ids: EmailMessageIdsTable;
  teams: TeamsTable;
  team_members: TeamMembersTable;
  saved_views: SavedViewsTable;
  macros: MacrosTable;
  macro_runs: MacroRunsTable;
  time_rule_firings: TimeRuleFiringsTable;
  notifications: NotificationsTable;
  sla_policies: SlaPoliciesTable;
  schedules: SchedulesTable;
  tickets: TicketsTable;
  ticket_events: TicketEventsTable;
  ticket_search: TicketSearchTable;
  time_entries: TimeEntriesTable;
  todos: TodosTable;
  attachments: AttachmentsTable;
  file_usage: FileUsageTable;
}

export type ApiKeyRow = Selectable<ApiKeysTable>;
export type NewApiKey = Insertable<ApiKeysTable>;
export type UserRow = Selectable<UsersTable>;
export type AuditRow = Selectable<AuditLogTable>;
export type CustomerRow = Selectable<CustomersTable>;
export type CustomerJobRow = Selectable<CustomerJobsTable>;
export type NewCustomer = Insertable<CustomersTable>;
export type TicketRow = Selectable<TicketsTable>;
export type NewTicket = Insertable<TicketsTable>;
export type TicketEventRow = Selectable<TicketEventsTable>;
export type TimeEntryRow = Selectable<TimeEntriesTable>;
export type TodoRow = Selectable<TodosTable>;
export type CsatResponseRow = Selectable<CsatResponsesTable>;
export type NewTicketEvent = Insertable<TicketEventsTable>;
export type SlaPolicyRow = Selectable<SlaPoliciesTable>;
export type ScheduleRow = Selectable<SchedulesTable>;
export type MacroRow = Selectable<MacrosTable>;
export type SavedViewRow = Selectable<SavedViewsTable>;
export type NotificationRow = Selectable<NotificationsTable>;
export type ChannelConnectionRow = Selectable<ChannelConnectionsTable>;
export type IngestDeliveryRow = Selectable<IngestDeliveriesTable>;
export type MailboxRow = Selectable<MailboxesTable>;
export type HelpTranslationRow = Selectable<HelpArticleTranslationsTable>;
export type OutboundMessageRow = Selectable<OutboundMessagesTable>;
export type IntegrationRow = Selectable<IntegrationsTable>;
export type TranscriptRow = Selectable<TranscriptsTable>;
export type TranscriptEventRow = Selectable<TranscriptEventsTable>;
export type OauthStateRow = Selectable<OauthStatesTable>;
export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
export type EventDeliveryRow = Selectable<EventDeliveriesTable>;
export type EventDeliveryAttemptRow = Selectable<EventDeliveryAttemptsTable>;
export type AttachmentRow = Selectable<AttachmentsTable>;
