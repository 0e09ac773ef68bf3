/**
 * Scope grammar of the spec (Authentication rules 6–9): <tag>:read, <tag>:write, <tag>:*, or *.
 * agent:<uuid> names a resource: it is accepted on a key but grants nothing by itself.
 */
import { isUuid } from '../../lib/ids';

export const SCOPE_TAGS = [
  'admin-resources',
  'channels',
  'tenants',
  'tickets',
  'helpdesk-ingress',
  'helpdesk-ops',
  'customers',
  'help-centre-staff',
  'notifications',
  // Outbound events (issue 19): read the log and stream; write manages webhook endpoints.
  'events',
  // Reports (issue 37): read only.
  'reports',
] as const;

export type ScopeTag = (typeof SCOPE_TAGS)[number];
export type ScopeAction = 'read' | 'write';

const TAGS: ReadonlySet<string> = new Set(SCOPE_TAGS);
const ACTION_GRAMMAR = /^([a-z][a-z0-9-]*):(read|write|\*)$/;
const AGENT_GRAMMAR = /^agent:(.+)$/;

export type ParsedScope =
  | { kind: 'all' }
  | { kind: 'action'; tag: ScopeTag; action: ScopeAction | '*' }
  | { kind: 'agent'; agentId: string };

/** Returns the parsed scope, or a reason it is not one this deployment can grant. */
export function parseScope(raw: string): ParsedScope | { invalid: string } {
  if (raw === '*') return { kind: 'all' };
  const agent = AGENT_GRAMMAR.exec(raw);
  if (agent) {
    return isUuid(agent[1]!) ? { kind: 'agent', agentId: agent[1]!.toLowerCase() } : { invalid: 'agent scope must name a uuid' };
  }
  const m = ACTION_GRAMMAR.exec(raw);
  if (!m) return { invalid: 'must be <tag>:read, <tag>:write, <tag>:* or *' };
  if (!TAGS.has(m[1]!)) return { invalid: `unknown tag "${m[1]}"` };
  return { kind: 'action', tag: m[1] as ScopeTag, action: m[2] as ScopeAction | '*' };
}

function coversOne(scope: ParsedScope, tag: ScopeTag, action: ScopeAction): boolean {
  if (scope.kind === 'all') return true;
  if (scope.kind !== 'action' || scope.tag !== tag) return false;
  // A write scope covers the reads of its tag; a read scope covers reads only.
  return scope.action === '*' || scope.action === 'write' || action === 'read';
}

export function scopesCover(scopes: readonly string[], tag: ScopeTag, action: ScopeAction): boolean {
  for (const raw of scopes) {
    const parsed = parseScope(raw);
    if (!('invalid' in parsed) && coversOne(parsed, tag, action)) return true;
  }
  return false;
}

/** Whether a key holding `held` may mint a key holding `wanted` (no key can mint a wider key than itself). */
export function scopeWithin(held: readonly string[], wanted: ParsedScope): boolean {
  if (wanted.kind === 'agent') return true;
  if (wanted.kind === 'all') return held.includes('*');
  if (wanted.action === '*') {
    return held.includes('*') || held.includes(`${wanted.tag}:*`);
  }
  return scopesCover(held, wanted.tag, wanted.action);
}

export function agentIdsOf(scopes: readonly string[]): string[] {
  const ids: string[] = [];
  for (const raw of scopes) {
    const parsed = parseScope(raw);
    if (!('invalid' in parsed) && parsed.kind === 'agent') ids.push(parsed.agentId);
  }
  return ids;
}
