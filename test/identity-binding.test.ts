import { randomBytes } from 'node:crypto';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();

const tag = () => randomBytes(4).toString('hex');

const invite = (ws: Workspace, body: Record<string, unknown>) => ctx.http.post('/v1/members').set(bearer(ws.ownerKey)).send(body);

const signIn = (sub: string, ws: Workspace, claims: Record<string, unknown> = {}) => ctx.realm.sign({ sub, tenant_id: ws.tenantId, ...claims });

async function membershipOf(ws: Workspace, userId: string) {
  return ctx.db
    .selectFrom('memberships')
    .select(['status', 'realm_subject'])
    .where('tenant_id', '=', ws.tenantId)
    .where('user_id', '=', userId)
    .executeTakeFirstOrThrow();
}

async function joinedEntries(ws: Workspace) {
  const res = await ctx.http.get('/v1/audit-log?limit=500').set(bearer(ws.ownerKey));
  expect(res.status).toBe(200);
  return (res.body.audit_entries as Array<{ action: string; target_id: string; details: Record<string, unknown> }>).filter((e) => e.action === 'member.joined');
}

/** Workspace A's admin pre-claims the victim's email with a subject the attacker controls. */
async function preClaimed() {
  const wsA = await createWorkspace(ctx, `Attacker ${tag()}`);
  const wsB = await createWorkspace(ctx, `Victim ${tag()}`);
  const email = `ceo-${tag()}@victim.example`;
  const attackerSub = `attacker-${tag()}`;
  const claim = await invite(wsA, { email, name: 'Attacker Claim', role: 'viewer', realm_subject: attackerSub });
  expect(claim.status).toBe(201);
  return { wsA, wsB, email, attackerSub, aUserId: claim.body.user_id as string };
}

/** Nothing workspace A typed or holds about the person appears in an answer to B. */
function revealsNothingOfA(body: unknown, a: { aUserId: string; attackerSub: string }) {
  const text = JSON.stringify(body);
  expect(text).not.toContain(a.aUserId);
  expect(text).not.toContain(a.attackerSub);
  expect(text).not.toContain('Attacker Claim');
}

describe('an admin of one workspace cannot bind a realm identity for another', () => {
  test('the attacker\'s pre-claimed subject gets 404 in the inviting workspace and mints nothing; the victim\'s verified sign-in binds and mints a * key', async () => {
    const a = await preClaimed();
    const { wsB, email, attackerSub } = a;
    const invited = await invite(wsB, { email: email.toUpperCase(), name: 'Cecilia Ceo', role: 'admin' });
    expect(invited.status).toBe(201);
    expect(invited.body).toMatchObject({ email: email.toUpperCase(), name: 'Cecilia Ceo', role: 'admin', status: 'invited', realm_subject: null });
    revealsNothingOfA(invited.body, a);
    const bUserId = invited.body.user_id as string;

    const attackerTokens = [
      await signIn(attackerSub, wsB),
      await signIn(attackerSub, wsB, { email }),
      await signIn(attackerSub, wsB, { email, email_verified: false }),
      await signIn(attackerSub, wsB, { email, email_verified: 'true' }),
      await signIn(attackerSub, wsB, { email_verified: true }),
    ];
    for (const token of attackerTokens) {
      const read = await ctx.http.get('/v1/members').set(bearer(token));
      expect(read.status).toBe(404);
      const mint = await ctx.http.post('/v1/api-keys').set(bearer(token)).send({ name: 'takeover', scopes: ['*'] });
      expect(mint.status).toBe(404);
      revealsNothingOfA(mint.body, a);
    }
    expect(await membershipOf(wsB, bUserId)).toEqual({ status: 'invited', realm_subject: null });
    const keys = await ctx.db.selectFrom('api_keys').select('id').where('tenant_id', '=', wsB.tenantId).where('created_by_user_id', '=', bUserId).execute();
    expect(keys).toHaveLength(0);

    const victimSub = `victim-${tag()}`;
    const victim = await signIn(victimSub, wsB, { email, email_verified: true });
    const key = await ctx.http.post('/v1/api-keys').set(bearer(victim)).send({ name: 'mine', scopes: ['*'] });
    expect(key.status).toBe(201);
    expect((await ctx.http.post('/v1/agents').set(bearer(key.body.secret)).send({ name: 'works' })).status).toBe(201);
    expect(await membershipOf(wsB, bUserId)).toEqual({ status: 'active', realm_subject: victimSub });

    // Bound now: the attacker's subject stays out even with the victim's address marked verified.
    const late = await signIn(attackerSub, wsB, { email, email_verified: true });
    expect((await ctx.http.get('/v1/members').set(bearer(late))).status).toBe(404);
    // A's own view of its claim is untouched.
    expect(await membershipOf(a.wsA, a.aUserId)).toEqual({ status: 'active', realm_subject: attackerSub });

    const joined = await joinedEntries(wsB);
    expect(joined).toHaveLength(1);
    expect(joined[0]).toMatchObject({ target_id: bUserId, details: { email: email.toUpperCase(), role: 'admin' } });
  });

  test('re-inviting with the right subject binds it in this workspace alone, never 409 realm_subject_conflict', async () => {
    const a = await preClaimed();
    const victimSub = `victim-${tag()}`;
    const res = await invite(a.wsB, { email: a.email, name: 'Cecilia Ceo', role: 'admin', realm_subject: victimSub });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: 'Cecilia Ceo', status: 'active', realm_subject: victimSub });
    revealsNothingOfA(res.body, a);
    expect((await ctx.http.get('/v1/members').set(bearer(await signIn(victimSub, a.wsB)))).status).toBe(200);
    expect((await ctx.http.get('/v1/members').set(bearer(await signIn(a.attackerSub, a.wsB)))).status).toBe(404);

    // A third workspace may even name the attacker's subject for the same email: bindings never cross workspaces.
    const wsC = await createWorkspace(ctx);
    const again = await invite(wsC, { email: a.email, name: 'Someone', role: 'viewer', realm_subject: a.attackerSub });
    expect(again.status).toBe(201);
    expect(again.body.user_id).not.toBe(a.aUserId);
    expect(again.body.name).toBe('Someone');
  });

  test('no answer to the inviting workspace tells whether, or as whom, another workspace knows the email', async () => {
    const a = await preClaimed();
    const unknownEmail = `nobody-${tag()}@victim.example`;
    const known = await invite(a.wsB, { email: a.email, name: 'Known', role: 'viewer' });
    const unknown = await invite(a.wsB, { email: unknownEmail, name: 'Known', role: 'viewer' });
    expect(known.status).toBe(201);
    expect(unknown.status).toBe(201);
    const shape = (b: Record<string, unknown>) => ({ ...b, user_id: 'x', email: 'x', created_at: 'x', updated_at: 'x' });
    expect(shape(known.body)).toEqual(shape(unknown.body));
    const list = await ctx.http.get('/v1/members').set(bearer(a.wsB.ownerKey));
    expect(list.status).toBe(200);
    revealsNothingOfA(list.body, a);
    const dup = await invite(a.wsB, { email: a.email.toUpperCase(), name: 'Dup', role: 'viewer' });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('member_exists');
    revealsNothingOfA(dup.body, a);
  });

  test('an invited member can do nothing before their sign-in: a token of theirs without a verified email is 404', async () => {
    const ws = await createWorkspace(ctx);
    const email = `new-${tag()}@acme.test`;
    expect((await invite(ws, { email, name: 'New', role: 'admin' })).status).toBe(201);
    const sub = `new-${tag()}`;
    expect((await ctx.http.get('/v1/members').set(bearer(await signIn(sub, ws)))).status).toBe(404);
    expect((await ctx.http.get('/v1/members').set(bearer(await signIn(sub, ws, { email: `other-${tag()}@acme.test`, email_verified: true })))).status).toBe(404);
    // The invitation of one workspace binds nothing in another.
    const elsewhere = await createWorkspace(ctx);
    expect((await ctx.http.get('/v1/members').set(bearer(await signIn(sub, elsewhere, { email, email_verified: true })))).status).toBe(404);
    expect((await ctx.http.get('/v1/members').set(bearer(await signIn(sub, ws, { email, email_verified: true })))).status).toBe(200);
  });
});

describe('first sign-ins racing for one invitation', () => {
  test('bind it once: every request of the winning subject succeeds, the other subject gets 404, one member.joined', async () => {
    const ws = await createWorkspace(ctx);
    const email = `race-${tag()}@acme.test`;
    const inv = await invite(ws, { email, name: 'Racer', role: 'editor' });
    expect(inv.status).toBe(201);
    const subs = [`first-${tag()}`, `second-${tag()}`];
    const tokens = await Promise.all(subs.map((s) => signIn(s, ws, { email, email_verified: true })));
    const calls = Array.from({ length: 16 }, (_, i) => i % 2);
    const results = await Promise.all(calls.map((i) => ctx.http.get('/v1/members').set(bearer(tokens[i]!)).then((r) => ({ i, status: r.status }))));
    const bound = await membershipOf(ws, inv.body.user_id);
    expect(bound.status).toBe('active');
    const winner = subs.indexOf(bound.realm_subject!);
    expect(winner).toBeGreaterThanOrEqual(0);
    for (const r of results) expect(r.status).toBe(r.i === winner ? 200 : 404);
    expect(await joinedEntries(ws)).toHaveLength(1);
    const rows = await ctx.db.selectFrom('memberships').select('user_id').where('tenant_id', '=', ws.tenantId).where('realm_subject', 'in', subs).execute();
    expect(rows).toHaveLength(1);
  });
});

describe('secrets and claims stay out of the logs', () => {
  test('a first sign-in logs no token', async () => {
    const ws = await createWorkspace(ctx);
    const email = `log-${tag()}@acme.test`;
    expect((await invite(ws, { email, name: 'Logged', role: 'viewer' })).status).toBe(201);
    const token = await signIn(`log-${tag()}`, ws, { email, email_verified: true });
    expect((await ctx.http.get('/v1/members').set(bearer(token))).status).toBe(200);
    expect(ctx.logs.text).not.toContain(token);
  });
});

describe('an active member without a bound subject', () => {
  test('an owner bootstrapped without a subject is claimed by their first sign-in with a verified email; a deactivated member never is', async () => {
    const ownerEmail = `founder-${tag()}@acme.test`;
    const boot = await ctx.services.workspaces.bootstrap({ workspace: `Acme ${tag()}`, ownerEmail, ownerName: 'Fay Founder' });
    const ws = { tenantId: boot.tenant_id, ownerKey: boot.api_key.secret } as Workspace;
    const sub = `founder-${tag()}`;
    const unverified = await ctx.http.get('/v1/members').set(bearer(await signIn(sub, ws, { email: ownerEmail, email_verified: false })));
    expect(unverified.status).toBe(404);
    const verified = await ctx.http.get('/v1/members').set(bearer(await signIn(sub, ws, { email: ownerEmail.toUpperCase(), email_verified: true })));
    expect(verified.status).toBe(200);
    expect(await membershipOf(ws, boot.owner_user_id)).toEqual({ status: 'active', realm_subject: sub });

    const paused = await invite(ws, { email: `paused-${tag()}@acme.test`, name: 'Paul Paused', role: 'editor', realm_subject: `paused-${tag()}` });
    expect(paused.status).toBe(201);
    await ctx.db.updateTable('memberships').set({ status: 'deactivated', realm_subject: null }).where('tenant_id', '=', ws.tenantId).where('user_id', '=', paused.body.user_id).execute();
    const retry = await ctx.http.get('/v1/members').set(bearer(await signIn(`other-${tag()}`, ws, { email: paused.body.email, email_verified: true })));
    expect(retry.status).toBe(404);
    expect(await membershipOf(ws, paused.body.user_id)).toEqual({ status: 'deactivated', realm_subject: null });
  });
});
