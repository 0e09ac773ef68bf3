import type { Role } from '../../db/types';
import { roleAtLeast } from './roles';
import { scopesCover } from './scopes';

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
  /**
   * When the credential stops being valid by itself (ms since the epoch): an access token's `exp`, an API
   * key's expiry. Absent for a key that never expires. What outlives one request (a live stream) ends here.
   */
  expiresAt?: number;
}

/**
 * Whether the caller may see integration ids: the id is the secret of a provider's public webhook URL (it
 * selects the workspace), so only a caller who may list integrations sees one, wherever it appears (a
 * transcript, the event log, the live stream).
 */
export const mayManageIntegrations = (p: Pick<Principal, 'role' | 'scopes'>) => roleAtLeast(p.role, 'admin') && (!p.scopes || scopesCover(p.scopes, 'admin-resources', 'read'));

/** The caller a per-caller budget counts: the API key, or the user of an access token. */
export const callerOf = (p: Pick<Principal, 'apiKeyId' | 'userId'>) => (p.apiKeyId ? `key:${p.apiKeyId}` : `user:${p.userId}`);
