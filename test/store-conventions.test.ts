/**
 * The store rule, checked over the source: every exported store function takes the workspace id right after
 * its executor, except the few that must cross workspaces (intake routing, authentication, sweeps), which are
 * named `crossTenant…` so that every call of one stands out in review; users are global (one person, many
 * workspaces), so their two lookups are the only other exception.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const DOMAINS = join(__dirname, '..', 'src', 'domains');
/** Rows of the global `users` table: no workspace to take. */
const GLOBAL = new Set(['insertUser', 'userName']);

function storeFiles(): string[] {
  return readdirSync(DOMAINS)
    .map((d) => join(DOMAINS, d))
    .filter((d) => statSync(d).isDirectory())
    .flatMap((d) => readdirSync(d).filter((f) => /store\.ts$/.test(f)).map((f) => join(d, f)));
}

function exportedFunctions(source: string): { name: string; params: string[] }[] {
  const out: { name: string; params: string[] }[] = [];
  for (const m of source.matchAll(/export (?:async )?function (\w+)\s*(?:<[^>]*>)?\(([^)]*)\)/g)) {
    out.push({ name: m[1]!, params: m[2]!.split(',').map((p) => p.trim()).filter(Boolean) });
  }
  return out;
}

test('every store function takes the tenant id second, or says in its name that it crosses workspaces', () => {
  const offenders: string[] = [];
  const crossing: string[] = [];
  for (const file of storeFiles()) {
    for (const fn of exportedFunctions(readFileSync(file, 'utf8'))) {
      if (fn.name.startsWith('crossTenant')) crossing.push(fn.name);
      else if (!GLOBAL.has(fn.name) && !fn.params[1]?.startsWith('tenantId')) offenders.push(`${file}: ${fn.name}(${fn.params.join(', ')})`);
    }
  }
  expect(offenders).toEqual([]);
  // The list is short on purpose; a new one is a decision to write down in docs/decisions.md.
  expect(crossing.sort()).toEqual([
    'crossTenantAbandonedClaims',
    'crossTenantAgentWorkspace',
    'crossTenantConnectionByToken',
    'crossTenantDeleteExpiredUploads',
    'crossTenantDropRoutes',
    'crossTenantDueForPoll',
    'crossTenantDueForRefresh',
    'crossTenantEndpointsDue',
    'crossTenantExpiredExports',
    'crossTenantFailStalePending',
    'crossTenantFeedsDue',
    'crossTenantHeads',
    'crossTenantHeldBetween',
    'crossTenantIntegrationForIntake',
    'crossTenantKeyByPrefix',
    'crossTenantListIds',
    'crossTenantLockOAuthState',
    'crossTenantMarkMissing',
    'crossTenantNeedingWork',
    'crossTenantPruneExpiredKeys',
    'crossTenantPruneOAuthStates',
    'crossTenantRetentionDue',
    'crossTenantRoute',
    'crossTenantStaleErasures',
    'crossTenantStaleExports',
    'crossTenantStaleOutbound',
    'crossTenantTimeRules',
    'crossTenantUnheldKeys',
    'crossTenantWebChatOrigins',
    'crossTenantWithBreachesDue',
    'crossTenantWithJournal',
  ]);
});
