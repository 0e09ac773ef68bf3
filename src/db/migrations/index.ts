import type { Migration, MigrationProvider } from 'kysely';
import * as m0001 from './0001_foundation';
import * as m0002 from './0002_tickets';
import * as m0003 from './0003_customer_counts';
import * as m0004 from './0004_queue_ops';
import * as m0005 from './0005_channels';
import * as m0006 from './0006_sharded_customer_counts';
import * as m0007 from './0007_ingest_duplicate_copies';
import * as m0008 from './0008_mailbox';
import * as m0009 from './0009_outbound_email';
import * as m0010 from './0010_webhooks';
import * as m0011 from './0011_rollups';
import * as m0012 from './0012_rollup_dimensions';
import * as m0013 from './0013_workspace_settings';
import * as m0014 from './0014_help_centres';
import * as m0015 from './0015_help_articles';
import * as m0016 from './0016_identity_binding';
import * as m0017 from './0017_webhook_duplicate_copies';
import * as m0018 from './0018_idempotency_keys';
import * as m0019 from './0019_ticket_versions';
import * as m0020 from './0020_settings_article_versions';
import * as m0021 from './0021_macro_versions';
import * as m0022 from './0022_page_indexes';
import * as m0023 from './0023_outbound_events';
import * as m0024 from './0024_webhook_endpoints';
import * as m0025 from './0025_webhook_senders';
import * as m0026 from './0026_sla_due_indexes';
import * as m0027 from './0027_customer_count_free_shard';
import * as m0028 from './0028_tenant_keys';
import * as m0029 from './0029_routes';
import * as m0030 from './0030_macro_notify';
import * as m0031 from './0031_duplicate_keys';
import * as m0032 from './0032_event_sizes';
import * as m0033 from './0033_delivery_fairness';
import * as m0034 from './0034_outbound_messages';
import * as m0035 from './0035_attachments';
import * as m0036 from './0036_outbound_parts';
import * as m0037 from './0037_visitor_uploads';
import * as m0038 from './0038_search';
import * as m0039 from './0039_search_people_articles';
import * as m0040 from './0040_schedules';
import * as m0041 from './0041_time_rules';
import * as m0042 from './0042_reports';
import * as m0043 from './0043_customers_as_people';

// Static imports keep migrations working the same under tsx, jest and a bundler; names sort by version.
const migrations: Record<string, Migration> = {
  '0001_foundation': m0001,
  '0002_tickets': m0002,
  '0003_customer_counts': m0003,
  '0004_queue_ops': m0004,
  '0005_channels': m0005,
  '0006_sharded_customer_counts': m0006,
  '0007_ingest_duplicate_copies': m0007,
  '0008_mailbox': m0008,
  '0009_outbound_email': m0009,
  '0010_webhooks': m0010,
  '0011_rollups': m0011,
  '0012_rollup_dimensions': m0012,
  '0013_workspace_settings': m0013,
  '0014_help_centres': m0014,
  '0015_help_articles': m0015,
  '0016_identity_binding': m0016,
  '0017_webhook_duplicate_copies': m0017,
  '0018_idempotency_keys': m0018,
  '0019_ticket_versions': m0019,
  '0020_settings_article_versions': m0020,
  '0021_macro_versions': m0021,
  '0022_page_indexes': m0022,
  '0023_outbound_events': m0023,
  '0024_webhook_endpoints': m0024,
  '0025_webhook_senders': m0025,
  '0026_sla_due_indexes': m0026,
  '0027_customer_count_free_shard': m0027,
  '0028_tenant_keys': m0028,
  '0029_routes': m0029,
  '0030_macro_notify': m0030,
  '0031_duplicate_keys': m0031,
  '0032_event_sizes': m0032,
  '0033_delivery_fairness': m0033,
  '0034_outbound_messages': m0034,
  '0035_attachments': m0035,
  '0036_outbound_parts': m0036,
  '0037_visitor_uploads': m0037,
  '0038_search': m0038,
  '0039_search_people_articles': m0039,
  '0040_schedules': m0040,
  '0041_time_rules': m0041,
  '0042_reports': m0042,
  '0043_customers_as_people': m0043,
};

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations,
};
