import type { ColumnType, Generated, Insertable, Selectable } from 'kysely';

type CreatedAt = ColumnType<Date, Date | string | undefined, never>;
type UpdatedAt = ColumnType<Date, Date | string | undefined, Date | string>;

export type Role = 'viewer' | 'editor' | 'admin' | 'owner';
export type MemberStatus = 'active' | 'deactivated';

export interface TenantsTable {
  id: string;
  name: string;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

/** People are global (one realm identity can belong to many workspaces); memberships carry tenant_id. */
export interface UsersTable {
  id: string;
  email: string;
  name: string;
  realm_subject: string | null;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface MembershipsTable {
  tenant_id: string;
  user_id: string;
  role: Role;
  status: MemberStatus;
  created_at: CreatedAt;
  updated_at: UpdatedAt;
}

export interface AgentsTable {
  id: string;
  tenant_id: string;
  name: string;
  created_at: CreatedAt;
}

export interface ApiKeysTable {
  id: string;
  tenant_id: string;
  created_by_user_id: string;
  name: string;
  prefix: string;
  secret_hash: Buffer;
  scopes: string[];
  expires_at: Date | null;
  last_used_at: Date | null;
  revoked_at: Date | null;
  created_at: CreatedAt;
}

export interface AuditLogTable {
  id: string;
  tenant_id: string;
  actor_user_id: string | null;
  actor_api_key_id: string | null;
  action: string;
  target_type: string;
  target_id: string | null;
  details: ColumnType<Record<string, unknown>, string, string>;
  created_at: CreatedAt;
  seq: Generated<string>;
}

export interface Database {
  tenants: TenantsTable;
  users: UsersTable;
  memberships: MembershipsTable;
  agents: AgentsTable;
  api_keys: ApiKeysTable;
  audit_log: AuditLogTable;
}

export type ApiKeyRow = Selectable<ApiKeysTable>;
export type NewApiKey = Insertable<ApiKeysTable>;
export type UserRow = Selectable<UsersTable>;
export type AuditRow = Selectable<AuditLogTable>;
