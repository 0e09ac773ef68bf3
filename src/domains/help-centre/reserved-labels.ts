/**
 * Labels under HELP_CENTRE_BASE_DOMAIN no workspace may take: hosts the operator runs (or may run) next to
 * the help centres, names mail and DNS clients probe automatically (autodiscover, autoconfig, mta-sts), and
 * names that read as the platform's own pages (login, billing, status) and so make convincing phishing.
 * Kept here rather than taken from a package: it is a product decision, short, and reviewed with this code.
 */
const RESERVED = new Set([
  'www', 'api', 'admin', 'administrator', 'app', 'apps', 'mail', 'email', 'webmail', 'smtp', 'imap', 'pop', 'pop3',
  'mx', 'ns', 'dns', 'ftp', 'sftp', 'ssh', 'vpn', 'help', 'helpdesk', 'support', 'status', 'docs', 'static', 'cdn',
  'assets', 'media', 'files', 'auth', 'oauth', 'login', 'logout', 'signin', 'signup', 'sso', 'id', 'account',
  'accounts', 'my', 'dashboard', 'console', 'billing', 'pay', 'payments', 'blog', 'dev', 'staging', 'stage', 'test',
  'demo', 'sandbox', 'beta', 'preview', 'internal', 'localhost', 'autodiscover', 'autoconfig', 'mta-sts',
  'wpad', 'isatap', 'root', 'security', 'abuse', 'postmaster', 'hostmaster', 'webmaster', 'noreply', 'no-reply',
  'ops', 'metrics', 'grafana', 'monitor', 'git', 'ws', 'wss', 'socket', 'edge', 'origin', 'proxy', 'gateway',
]);

/** Numbered variants of infrastructure names: www2, ns1, ns2, mx10, api-v2 stay reserved too. */
const RESERVED_FAMILY = /^(?:www|ns|dns|mx|mail|smtp|imap|pop|api|cdn|static|app)(?:-?v?\d+)$/;

export const isReservedLabel = (label: string): boolean => RESERVED.has(label) || RESERVED_FAMILY.test(label);
