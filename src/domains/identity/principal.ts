import type { Role } from '../../db/types';

/** Who is calling, resolved live from the database on every request. */
export interface Principal {
  kind: 'user' | 'api_key';
  tenantId: string;
  userId: string;
  /** The live membership role: the signed-in user's, or the key creator's. */
  role: Role;
  apiKeyId: string | null;
  /** Null for access tokens (a person is bounded by role only); the key's scopes otherwise. */
  scopes: string[] | null;
  /** Agents an agent:<uuid> scope narrows the key to; empty means not narrowed. */
  agentIds: string[];
  /**
   * The user's display name, read with the credential in the same statement: what the events this request
   * writes are signed with. Absent when the read did not have it (the event's writer then reads it).
   */
  userName?: string | null;
}
