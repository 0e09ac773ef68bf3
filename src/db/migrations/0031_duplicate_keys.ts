import { type Kysely, sql } from 'kysely';

/**
 * Drops the `UNIQUE (tenant_id, id)` constraints that 0028 left beside primary keys on the same columns
 * (issue 21, part 2). Until 0028 they were what the foreign keys referenced; since then each is a second copy
 * of its primary key's index, and every insert, and every update that is not HOT (a ticket write moves
 * `updated_at`, which an index holds), wrote both. The foreign keys that used such an index are dropped and
 * added again as they were, so they use the primary key's. Found by catalog rather than listed: the test that
 * no table keeps two indexes on the same columns (test/schema-distribution.test.ts) keeps it that way.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DO $$
    DECLARE dup record; fk record; readd text[]; stmt text;
    BEGIN
      FOR dup IN
        SELECT u.conrelid::regclass AS rel, u.conname, u.conindid
        FROM pg_constraint u
        JOIN pg_constraint p ON p.conrelid = u.conrelid AND p.contype = 'p' AND p.conkey = u.conkey
        WHERE u.contype = 'u' AND u.connamespace = 'public'::regnamespace
      LOOP
        readd := '{}';
        FOR fk IN SELECT conrelid::regclass AS rel, conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE contype = 'f' AND conindid = dup.conindid LOOP
          readd := readd || format('ALTER TABLE %s ADD CONSTRAINT %I %s', fk.rel, fk.conname, fk.def);
          EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', fk.rel, fk.conname);
        END LOOP;
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', dup.rel, dup.conname);
        FOREACH stmt IN ARRAY readd LOOP EXECUTE stmt; END LOOP;
      END LOOP;
    END $$;
  `.execute(db);
}

/** Puts the second copies back (under PostgreSQL's default names, as 0001–0014 made them). */
export async function down(db: Kysely<unknown>): Promise<void> {
  for (const t of ['agents', 'customers', 'teams', 'sla_policies', 'tickets', 'macros', 'integrations', 'transcripts', 'help_centres']) {
    await sql`ALTER TABLE ${sql.table(t)} ADD CONSTRAINT ${sql.raw(`${t}_tenant_id_id_key`)} UNIQUE (tenant_id, id)`.execute(db);
  }
}
