import { type Kysely, sql } from 'kysely';

/**
 * Identity binding moves from the global user to the membership (issue 15): a realm subject is bound to a
 * person per workspace, by that workspace's own invitation or by the person's first sign-in with a verified
 * email, so no admin of one workspace can decide who signs in as a member of another. Nothing global is
 * read for binding any more, so the global uniqueness of subject and email goes; the columns stay.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE memberships ADD COLUMN realm_subject text;
    ALTER TABLE memberships DROP CONSTRAINT memberships_status_check;
    ALTER TABLE memberships ADD CONSTRAINT memberships_status_check CHECK (status IN ('active', 'deactivated', 'invited'));
    UPDATE memberships m SET realm_subject = u.realm_subject FROM users u WHERE u.id = m.user_id AND u.realm_subject IS NOT NULL;
    CREATE UNIQUE INDEX memberships_tenant_realm_subject ON memberships (tenant_id, realm_subject) WHERE realm_subject IS NOT NULL;
    ALTER TABLE users DROP CONSTRAINT users_realm_subject_key;
    DROP INDEX users_email_key;
  `.execute(db);
}
