import type { TestContext } from './context';
import { addMember, bearer, type Member, type Workspace } from './factories';

/** Creates a team through the API as the workspace owner and returns its id. */
export async function createTeam(ctx: TestContext, ws: Workspace, name = 'Tier 1'): Promise<string> {
  const res = await ctx.http.post('/v1/teams').set(bearer(ws.ownerKey)).send({ name });
  if (res.status !== 201) throw new Error(`createTeam failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

/** Appends a workspace member to the team's rotation through the API. */
export async function addToTeam(ctx: TestContext, ws: Workspace, teamId: string, userId: string): Promise<void> {
  const res = await ctx.http.post(`/v1/teams/${teamId}/members`).set(bearer(ws.ownerKey)).send({ user_id: userId });
  if (res.status !== 204) throw new Error(`addToTeam failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Sets a member's own presence with their own token. */
export async function setPresence(ctx: TestContext, m: Member, presence: 'online' | 'away' | 'offline'): Promise<void> {
  const res = await ctx.http.put('/v1/me/presence').set(bearer(m.token)).send({ presence });
  if (res.status !== 200) throw new Error(`setPresence failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Sets a member's own helpdesk_unavailable preference with their own token. */
export async function setUnavailable(ctx: TestContext, m: Member, helpdesk_unavailable: boolean): Promise<void> {
  const res = await ctx.http.patch('/v1/me/preferences').set(bearer(m.token)).send({ helpdesk_unavailable });
  if (res.status !== 200) throw new Error(`setUnavailable failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** A team of `n` editors, each online (set by themselves) and appended to the rotation in order. */
export async function onlineTeam(ctx: TestContext, ws: Workspace, n: number, name = 'Tier 1'): Promise<{ teamId: string; members: Member[] }> {
  const teamId = await createTeam(ctx, ws, name);
  const members: Member[] = [];
  for (let i = 0; i < n; i += 1) {
    const m = await addMember(ctx, ws, 'editor');
    await setPresence(ctx, m, 'online');
    await addToTeam(ctx, ws, teamId, m.userId);
    members.push(m);
  }
  return { teamId, members };
}

/** POST /v1/teams/{team_id}/assign as the holder of `token` (the owner's key by default). */
export const assign = (ctx: TestContext, ws: Workspace, teamId: string, ticketId: string, token = ws.ownerKey) =>
  ctx.http.post(`/v1/teams/${teamId}/assign`).set(bearer(token)).send({ ticket_id: ticketId });
