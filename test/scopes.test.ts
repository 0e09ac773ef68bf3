import { parseScope, scopesCover, scopeWithin, type ScopeTag } from '../src/domains/identity/scopes';

describe('scope grammar (Authentication rules 6–8)', () => {
  test.each(['*', 'tickets:read', 'tickets:write', 'tickets:*', 'help-centre-staff:read', 'agent:0190a3b4-0000-7000-8000-000000000001'])(
    'accepts %s',
    (raw) => {
      expect(parseScope(raw)).not.toHaveProperty('invalid');
    },
  );

  test.each(['tickets:delete', 'nope', ':read', 'tickets', 'unknown-tag:read', 'agent:not-a-uuid', 'TICKETS:read', '**', ''])(
    'refuses %s as a scope this deployment cannot grant',
    (raw) => {
      expect(parseScope(raw)).toHaveProperty('invalid');
    },
  );

  test('a write scope covers the reads of the same tag but not other tags', () => {
    expect(scopesCover(['tickets:write'], 'tickets', 'read')).toBe(true);
    expect(scopesCover(['tickets:write'], 'tickets', 'write')).toBe(true);
    expect(scopesCover(['tickets:write'], 'customers', 'read')).toBe(false);
  });

  test('a read scope does not cover writes', () => {
    expect(scopesCover(['tickets:read'], 'tickets', 'write')).toBe(false);
  });

  test('<tag>:* covers both actions of its tag only', () => {
    expect(scopesCover(['tickets:*'], 'tickets', 'write')).toBe(true);
    expect(scopesCover(['tickets:*'], 'channels', 'read')).toBe(false);
  });

  test('an empty scope set reaches nothing', () => {
    expect(scopesCover([], 'tickets', 'read')).toBe(false);
  });

  test('agent:<uuid> alone grants nothing', () => {
    expect(scopesCover(['agent:0190a3b4-0000-7000-8000-000000000001'], 'admin-resources', 'read')).toBe(false);
  });

  test('only * covers an operation whose tag did not exist when the key was minted', () => {
    const future = 'reports' as ScopeTag;
    expect(scopesCover(['*'], future, 'write')).toBe(true);
    for (const held of ['admin-resources:*', 'tickets:*', 'tickets:write']) expect(scopesCover([held], future, 'read')).toBe(false);
  });

  test('a key cannot mint a scope wider than its own', () => {
    const star = parseScope('*');
    const ticketsAll = parseScope('tickets:*');
    const ticketsWrite = parseScope('tickets:write');
    if ('invalid' in star || 'invalid' in ticketsAll || 'invalid' in ticketsWrite) throw new Error('fixture');
    expect(scopeWithin(['tickets:*'], star)).toBe(false);
    expect(scopeWithin(['tickets:write'], ticketsAll)).toBe(false);
    expect(scopeWithin(['tickets:write'], ticketsWrite)).toBe(true);
    expect(scopeWithin(['*'], ticketsAll)).toBe(true);
  });
});
