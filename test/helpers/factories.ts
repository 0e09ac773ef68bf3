import { randomBytes } from 'node:crypto';
import type { Role } from '../../src/db/types';
import type { TestContext } from './context';

export interface Workspace {
  tenantId: string;
  ownerId: string;
  ownerSubject: string;
  ownerKey: string;
  ownerKeyId: string;
}

const tag = () => randomBytes(4).toString('hex');

export const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** A workspace made the way the bootstrap CLI makes it: owner plus an owner key with scope *. */
export async function createWorkspace(ctx: TestContext, name = `Acme ${tag()}`): Promise<Workspace> {
  const ownerSubject = `owner-${tag()}`;
  const r = await ctx.services.workspaces.bootstrap({
    workspace: name,
    ownerEmail: `${ownerSubject}@acme.test`,
    ownerName: 'Olive Owner',
    ownerRealmSubject: ownerSubject,
  });
  return { tenantId: r.tenant_id, ownerId: r.owner_user_id, ownerSubject, ownerKey: r.api_key.secret, ownerKeyId: r.api_key.id };
}

export interface Member {
  userId: string;
  subject: string;
  email: string;
  token: string;
}

/** Adds a member through the API and returns a realm access token for them. */
export async function addMember(ctx: TestContext, ws: Workspace, role: Role): Promise<Member> {
  const subject = `${role}-${tag()}`;
  const email = `${subject}@acme.test`;
  const res = await ctx.http
    .post('/v1/members')
    .set(bearer(ws.ownerKey))
    .send({ email, name: `${role} person`, role, realm_subject: subject });
  if (res.status !== 201) throw new Error(`addMember failed: ${res.status} ${JSON.stringify(res.body)}`);
  const token = await ctx.realm.sign({ sub: subject, tenant_id: ws.tenantId });
  return { userId: res.body.user_id, subject, email, token };
}

/** Mints a key through the API as the holder of `creatorToken`. */
export async function mintKey(
  ctx: TestContext,
  creatorToken: string,
  body: { name?: string; scopes?: string[]; agent_id?: string; expires_in_days?: number },
): Promise<{ id: string; secret: string; prefix: string; scopes: string[] }> {
  const res = await ctx.http.post('/v1/api-keys').set(bearer(creatorToken)).send({ name: `key ${tag()}`, ...body });
  if (res.status !== 201) throw new Error(`mintKey failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}
