import { type Kysely, sql } from 'kysely';

/*
 * Ticket search (issue 36): PostgreSQL full-text search, maintained in the same transaction as every write.
 * docs/decisions/search.md has the reasons; in short:
 *
 * - Two text search configurations. hd_english stems (refunds → refund), hd_simple keeps words as written (ids,
 *   emails, stop words); both strip accents first, so "Déjà vu" and "deja vu" give the same lexemes. Text is
 *   indexed under both, concatenated, and a query term matches under either. The simple half is indexed with
 *   '-' and '+' read as spaces (and queries are read the same way), so "4471" finds "INV-4471" and a phone
 *   written "+14155550100" is found by its digits; the english half keeps the text as written, so the whole
 *   "INV-4471" or "+14155550100" is found too.
 * - One row per ticket in ticket_search, apart from tickets: a status, assignee or version change of a ticket
 *   (every write bumps its version) must not rewrite the ticket's GIN entries, which a non-HOT update of a row
 *   holding the document would (every indexed lexeme inserted again).
 * - Every piece of maintenance is a trigger or function named search_*, so a bench can disable exactly them to
 *   measure intake without it (ALTER TABLE … DISABLE TRIGGER search_…), and nothing else maintains the table.
 * - The document is capped at DOC_MAX_BYTES of tsvector: a tsvector holds at most 1 MB, so an append past it
 *   would fail the write that made it (an inbound message of a ticket with a long history). A message either
 *   fits whole or is left out of the document. The column is stored EXTERNAL (out of line, never compressed),
 *   so pg_column_size is the document's true size, read from the toast pointer without fetching it, and ranking
 *   reads documents without decompressing them.
 *
 * What the document holds: the subject (weight A), the tags (B), the customer's name, email, handles and the
 * ticket's source (C), the description and every message body (D): inbound messages, replies and internal
 * notes, and an opening event's body when it differs from the description (it is the description, as a rule).
 * Provider message ids (an inbound message's, an email's Message-ID, an outbound message's once sent) are in it
 * too. Merged tickets keep their rows; search leaves them out (their events were copied to the winner, whose
 * document holds them).
 */

/** Frozen here as a literal: a migration never follows live code (test/layering.test.ts). */
const DOC_MAX_BYTES = 262_144;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE EXTENSION IF NOT EXISTS unaccent;
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE EXTENSION IF NOT EXISTS btree_gin;

    CREATE TEXT SEARCH CONFIGURATION hd_english (COPY = english);
    ALTER TEXT SEARCH CONFIGURATION hd_english
      ALTER MAPPING FOR asciiword, word, hword, hword_part, asciihword, hword_asciipart WITH unaccent, english_stem;
    CREATE TEXT SEARCH CONFIGURATION hd_simple (COPY = simple);
    ALTER TEXT SEARCH CONFIGURATION hd_simple
      ALTER MAPPING FOR asciiword, word, hword, hword_part, asciihword, hword_asciipart WITH unaccent, simple;

    -- The handles of a customer, read for each new ticket (and by a customer's deletion, which cascades to them).
    CREATE INDEX customer_handles_customer ON customer_handles (tenant_id, customer_id);

    CREATE TABLE ticket_search (
      tenant_id uuid NOT NULL,
      ticket_id uuid NOT NULL,
      doc tsvector NOT NULL,
      PRIMARY KEY (tenant_id, ticket_id),
      FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE
    );
    ALTER TABLE ticket_search ALTER COLUMN doc SET STORAGE EXTERNAL;

    -- What the text search parser is given of a caller's text: its first 64 KiB, underscores read as spaces (the
    -- parser splits words at them anyway) and a space after every 100 characters without one. The parser's time is
    -- quadratic in the length of a run without spaces (20,000 characters of "_a" took it 1.7 s, of "a-1." 0.8 s,
    -- inside the writing transaction); runs of at most 100 keep a pathological megabyte at about the cost of prose.
    -- PostgreSQL's regular expressions run as automata, not by backtracking: this one is linear in the text.
    CREATE FUNCTION search_safe(t text) RETURNS text
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN regexp_replace(translate(left(coalesce(t, ''), 65536), '_', ' '), '(\\S{100})', '\\1 ', 'g');

    -- A text under both configurations (the simple half with '-' and '+' read as spaces, as queries read them).
    CREATE FUNCTION search_text(t text) RETURNS tsvector
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN (SELECT to_tsvector('hd_english', x.s) || to_tsvector('hd_simple', translate(x.s, '-+', '  ')) FROM (SELECT search_safe(t) AS s) x);

    -- What a ticket's own fields and its customer give the document.
    CREATE FUNCTION search_head_doc(subject text, description text, tags text[], source text, customer_name text, customer_email text, handles text[])
      RETURNS tsvector
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN setweight(search_text(subject), 'A')
        || setweight(search_text(array_to_string(tags, ' ')), 'B')
        || setweight(
             search_text(customer_name)
             -- An email as one word, and its parts (local part, domain labels) as words of their own.
             || to_tsvector('hd_simple', coalesce(customer_email, '') || ' ' || translate(coalesce(customer_email, ''), '@._-+', '     '))
             -- A handle as written and by its digits (a phone number however it is written in the query).
             || to_tsvector('hd_simple', array_to_string(handles, ' ') || ' ' || regexp_replace(array_to_string(handles, ' '), '[^0-9 ]', '', 'g'))
             || to_tsvector('hd_simple', coalesce(source, '')),
           'C')
        || search_text(description);

    -- What one event adds: a message's body (unless it is the description again) and the provider's id of it;
    -- NULL for everything else (status changes, assignments, delivery updates after the first).
    CREATE FUNCTION search_event_doc(kind text, body text, meta jsonb, description text) RETURNS tsvector
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN CASE
        WHEN kind IN ('ticket_created', 'reply', 'internal_note') OR kind LIKE 'inbound\\_%' THEN
          (CASE WHEN body <> '' AND body IS DISTINCT FROM description THEN search_text(body) ELSE ''::tsvector END)
          || to_tsvector('hd_simple', concat_ws(' ', meta->>'provider_message_id', meta->>'message_id'))
        WHEN kind = 'delivery' AND meta->>'state' = 'sent' AND meta ? 'provider_message_id' THEN
          to_tsvector('hd_simple', concat_ws(' ', meta->>'provider_message_id', meta->>'message_id'))
      END;

    -- The document with the parts appended in order, each only if it fits whole under the cap.
    CREATE FUNCTION search_append(doc tsvector, parts tsvector[]) RETURNS tsvector
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
      AS $$
      DECLARE
        part tsvector;
      BEGIN
        FOREACH part IN ARRAY parts LOOP
          CONTINUE WHEN part IS NULL OR length(part) = 0;
          IF pg_column_size(doc) + pg_column_size(part) <= ${sql.raw(String(DOC_MAX_BYTES))} THEN
            doc := doc || part;
          END IF;
        END LOOP;
        RETURN doc;
      END $$;

    -- A ticket's whole document, from its rows (the rebuild after a change of its fields, and backfills).
    CREATE FUNCTION search_ticket_doc(p_tenant uuid, p_ticket uuid) RETURNS tsvector
      LANGUAGE sql STABLE
      RETURN (
        SELECT search_append(
          search_head_doc(t.subject, t.description, t.tags, t.source, c.display_name, c.email,
            ARRAY(SELECT h.handle FROM customer_handles h WHERE h.tenant_id = t.tenant_id AND h.customer_id = t.customer_id ORDER BY h.kind, h.handle)),
          ARRAY(SELECT search_event_doc(e.kind, e.body, e.meta, t.description) FROM ticket_events e
                WHERE e.tenant_id = t.tenant_id AND e.ticket_id = t.id ORDER BY e.created_at, e.seq))
        FROM tickets t JOIN customers c ON c.tenant_id = t.tenant_id AND c.id = t.customer_id
        WHERE t.tenant_id = p_tenant AND t.id = p_ticket);

    CREATE FUNCTION search_rebuild_ticket(p_tenant uuid, p_ticket uuid) RETURNS void
      LANGUAGE sql
      BEGIN ATOMIC
        INSERT INTO ticket_search (tenant_id, ticket_id, doc)
          SELECT p_tenant, p_ticket, d FROM search_ticket_doc(p_tenant, p_ticket) d WHERE d IS NOT NULL
          ON CONFLICT (tenant_id, ticket_id) DO UPDATE SET doc = excluded.doc;
      END;

    -- New tickets, once per statement (an ingest batch opens many in one INSERT).
    CREATE FUNCTION search_tickets_inserted() RETURNS trigger
      LANGUAGE plpgsql
      AS $$
      BEGIN
        INSERT INTO ticket_search (tenant_id, ticket_id, doc)
          SELECT t.tenant_id, t.id,
                 search_head_doc(t.subject, t.description, t.tags, t.source, c.display_name, c.email,
                   ARRAY(SELECT h.handle FROM customer_handles h WHERE h.tenant_id = t.tenant_id AND h.customer_id = t.customer_id ORDER BY h.kind, h.handle))
          FROM new_tickets t JOIN customers c ON c.tenant_id = t.tenant_id AND c.id = t.customer_id
          ON CONFLICT (tenant_id, ticket_id) DO NOTHING;
        RETURN NULL;
      END $$;
    CREATE TRIGGER search_tickets_inserted AFTER INSERT ON tickets
      REFERENCING NEW TABLE AS new_tickets FOR EACH STATEMENT EXECUTE FUNCTION search_tickets_inserted();

    -- A change of what the head of the document is made of: the document is rebuilt from the rows.
    CREATE FUNCTION search_ticket_changed() RETURNS trigger
      LANGUAGE plpgsql
      AS $$
      BEGIN
        PERFORM search_rebuild_ticket(NEW.tenant_id, NEW.id);
        RETURN NULL;
      END $$;
    CREATE TRIGGER search_ticket_changed AFTER UPDATE OF subject, description, tags, customer_id ON tickets
      FOR EACH ROW
      WHEN (OLD.subject IS DISTINCT FROM NEW.subject OR OLD.description IS DISTINCT FROM NEW.description
            OR OLD.tags IS DISTINCT FROM NEW.tags OR OLD.customer_id IS DISTINCT FROM NEW.customer_id)
      EXECUTE FUNCTION search_ticket_changed();

    -- New events, once per statement (a merge copies every event of the source in one INSERT): each ticket's
    -- new parts appended in timeline order, one UPDATE of its row.
    CREATE FUNCTION search_events_inserted() RETURNS trigger
      LANGUAGE plpgsql
      AS $$
      BEGIN
        UPDATE ticket_search s SET doc = search_append(s.doc, n.parts)
          FROM (
            SELECT e.tenant_id, e.ticket_id, array_agg(v.doc ORDER BY e.created_at, e.seq) AS parts
            FROM new_events e
            JOIN tickets t ON t.tenant_id = e.tenant_id AND t.id = e.ticket_id
            CROSS JOIN LATERAL (SELECT search_event_doc(e.kind, e.body, e.meta, t.description) AS doc) v
            WHERE (e.kind IN ('ticket_created', 'reply', 'internal_note', 'delivery') OR e.kind LIKE 'inbound\\_%')
              AND v.doc IS NOT NULL
            GROUP BY e.tenant_id, e.ticket_id
          ) n
          WHERE s.tenant_id = n.tenant_id AND s.ticket_id = n.ticket_id;
        RETURN NULL;
      END $$;
    CREATE TRIGGER search_events_inserted AFTER INSERT ON ticket_events
      REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION search_events_inserted();
  `.execute(db);

  // The tickets already there, in one statement over joins (no per-ticket function calls reading rows).
  await sql`
    INSERT INTO ticket_search (tenant_id, ticket_id, doc)
    SELECT t.tenant_id, t.id,
           search_append(search_head_doc(t.subject, t.description, t.tags, t.source, c.display_name, c.email, coalesce(h.handles, '{}')), coalesce(m.parts, '{}'))
    FROM tickets t
    JOIN customers c ON c.tenant_id = t.tenant_id AND c.id = t.customer_id
    LEFT JOIN (
      SELECT tenant_id, customer_id, array_agg(handle ORDER BY kind, handle) AS handles FROM customer_handles GROUP BY tenant_id, customer_id
    ) h ON h.tenant_id = t.tenant_id AND h.customer_id = t.customer_id
    LEFT JOIN (
      SELECT e.tenant_id, e.ticket_id, array_agg(search_event_doc(e.kind, e.body, e.meta, t2.description) ORDER BY e.created_at, e.seq) AS parts
      FROM ticket_events e JOIN tickets t2 ON t2.tenant_id = e.tenant_id AND t2.id = e.ticket_id
      WHERE e.kind IN ('ticket_created', 'reply', 'internal_note', 'delivery') OR e.kind LIKE 'inbound\\_%'
      GROUP BY e.tenant_id, e.ticket_id
    ) m ON m.tenant_id = t.tenant_id AND m.ticket_id = t.id
  `.execute(db);

  // Built after the backfill (one sorted build instead of as many inserts), led by the workspace (Citus).
  await sql`CREATE INDEX ticket_search_doc ON ticket_search USING gin (tenant_id, doc)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER search_events_inserted ON ticket_events;
    DROP TRIGGER search_ticket_changed ON tickets;
    DROP TRIGGER search_tickets_inserted ON tickets;
    DROP FUNCTION search_events_inserted(), search_ticket_changed(), search_tickets_inserted();
    DROP FUNCTION search_rebuild_ticket(uuid, uuid);
    DROP FUNCTION search_ticket_doc(uuid, uuid);
    DROP FUNCTION search_append(tsvector, tsvector[]), search_event_doc(text, text, jsonb, text);
    DROP FUNCTION search_head_doc(text, text, text[], text, text, text, text[]);
    DROP FUNCTION search_text(text);
    DROP FUNCTION search_safe(text);
    DROP TABLE ticket_search;
    DROP INDEX customer_handles_customer;
    DROP TEXT SEARCH CONFIGURATION hd_simple;
    DROP TEXT SEARCH CONFIGURATION hd_english;
    -- RESTRICT: an extension something else still uses (one that was there before this migration) stays an error
    -- to look at, never a silent cascade.
    DROP EXTENSION btree_gin;
    DROP EXTENSION pg_trgm;
    DROP EXTENSION unaccent;
  `.execute(db);
}
