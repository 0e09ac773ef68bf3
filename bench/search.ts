/**
 * Search at size (issue 36). One workspace of 1,000,000 tickets, 10,000,000 timeline events and 1,000,000
 * customers, generated inside PostgreSQL by this bench, then:
 * 1. Query latency through the real API process (BENCH_CONNECTIONS clients at once, every query distinct):
 *    p50/p95/p99 of 1–3-word queries, phrase queries, word queries with `status:open`, invoice numbers, and
 *    customer fragment search (an email fragment; a phone fragment written in another format than stored), with
 *    p95 per frequency band of the words and how many tickets each band's queries match. Baseline: the plain
 *    first page of GET /v1/tickets, measured the same way in the same run. Targets (issue 36): p95 of word
 *    queries ≤ 250 ms, of phrases ≤ 400 ms, of customer fragments ≤ 100 ms.
 * 2. Intake with and without index maintenance, the events bench's paired method on a fresh small database: SMS
 *    intake through the real API and worker, ROUNDS pairs run alternately (with, without) and (without, with)
 *    the `search_*` triggers enabled; the figure is the median pair's ratio (target ≥ 0.9×), with CPU-ms per
 *    message of each component.
 * 3. The size of ticket_search and of each search index, per million events and per million tickets, and the
 *    customers' trigram indexes.
 *
 * The text is support English from a fixed vocabulary of 20,000 words, drawn Zipf-distributed (s = 1: the
 * word of rank r comes up in proportion to 1/r): ~110 function words, ~500 support words, 40 accented words at
 * mid ranks, then inflected and prefixed forms of ~400 roots (refund → refunds, refunding, refundable,
 * prerefund), so the English stemmer folds many of them as it would real text. Messages carry invoice numbers
 * (`INV-4471`), product names and order numbers now and then. Everything, ids included (UUIDv7 as the app
 * makes them), is a function of BENCH_SEARCH_SEED: two generations give the same database.
 *
 * Generation is set-based, never a row at a time from here: the bulk-loaded tables' secondary indexes are
 * dropped and rebuilt after the load, the `search_*` triggers are disabled during it, tickets and events are
 * written in batches of BATCH tickets on two connections (one per core), then ticket_search is filled by
 * calling the engine's own `search_ticket_doc(tenant, ticket)` per ticket (so a generated document is the one
 * the triggers would have built), the triggers re-enabled and the tables vacuumed and analysed. Each step's
 * time is printed (about 17 minutes at the default sizes on 2 cores, most of it the documents and their GIN
 * index). The database (helpdesk_bench_search, about 12 GB) is kept with a marker of what it holds: the next run
 * with the same seed, sizes and generator version migrates it to the code's latest migration and reuses it, unless
 * the search functions, triggers or indexes then differ from those it was generated under (its documents would
 * be stale), in which case it is dropped and generated again.
 *   npm run bench:search   BENCH_SEARCH_TICKETS (1000000), BENCH_SEARCH_EVENTS (10000000), BENCH_SEARCH_CUSTOMERS
 *                          (1000000), BENCH_SEARCH_SEED (36), BENCH_SEARCH_QUERIES (100 per band and kind),
 *                          BENCH_SEARCH_COUNTED (20 per band and kind run again under EXPLAIN to count matches),
 *                          BENCH_CONNECTIONS (4), BENCH_SECONDS (8 per intake case), BENCH_ROUNDS (5),
 *                          BENCH_SEARCH_PARTS (queries,intake,sizes), BENCH_SEARCH_KEEP (1; 0 drops the database after)
 */
import { createHash, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { Kysely, PostgresDialect } from 'kysely';
import { Client } from 'pg';
import { loadConfig } from '../src/config';
import { createDb, migrateToLatest } from '../src/db';
import { ensureDatabase } from '../src/db/admin';
import type { Database } from '../src/db/types';
import { createApiKeyService } from '../src/domains/api-keys/service';
import { createAuditService } from '../src/domains/audit/service';
import type { Principal } from '../src/domains/identity/principal';
import { createPgTicketSearch } from '../src/domains/search/engine';
import { parseTicketQuery, SEARCH_LIMIT_CEILING } from '../src/domains/search/query';
import { createWorkspaceService } from '../src/domains/workspaces/service';
import { benchDatabaseUrl, dropBenchDatabase } from './lib';
import { benchEnv, cpuPer, cpuSample, freshDatabase, smsWorkspace, start, stop, type Env } from './processes';
import { createReport, quantile, runBench } from './report';

const int = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const TICKETS = int('BENCH_SEARCH_TICKETS', 1_000_000);
const EVENTS = int('BENCH_SEARCH_EVENTS', 10_000_000);
const CUSTOMERS = int('BENCH_SEARCH_CUSTOMERS', 1_000_000);
const SEED = int('BENCH_SEARCH_SEED', 36);
const PER_BAND = int('BENCH_SEARCH_QUERIES', 100);
/** Queries per band and kind run again under EXPLAIN to count the tickets they matched. */
const COUNTED = int('BENCH_SEARCH_COUNTED', 20);
const CONNECTIONS = int('BENCH_CONNECTIONS', 4);
const INTAKE_SECONDS = int('BENCH_SECONDS', 8);
const ROUNDS = int('BENCH_ROUNDS', 5);
const INTAKE_CONNECTIONS = 64;
const PARTS = new Set((process.env.BENCH_SEARCH_PARTS ?? 'queries,intake,sizes').split(',').map((p) => p.trim()));
const KEEP = process.env.BENCH_SEARCH_KEEP !== '0';
const VOCABULARY = 20_000;
/** Tickets per generating statement: big enough that a statement's overhead is nothing, small enough to show progress. */
const BATCH = 50_000;
/** Bump when the generator writes different rows: a kept database made by another version is regenerated. */
const GENERATOR_VERSION = 2;
const DATABASE = 'helpdesk_bench_search';
const PORT = 18171;
const INTAKE_PORT = 18172;
/** Bytes per word in the vocabulary blob the generator indexes into (fixed width, so a word is one substring). */
const WIDTH = 40;
/** Every generated timestamp counts from here (fixed, so the ids are too). */
const EPOCH = '2024-01-01T00:00:00Z';

const report = createReport('search', {
  title: `Search at ${TICKETS.toLocaleString('en-US')} tickets, ${EVENTS.toLocaleString('en-US')} events and ${CUSTOMERS.toLocaleString('en-US')} customers`,
  settings: { tickets: TICKETS, events: EVENTS, customers: CUSTOMERS, seed: SEED, vocabulary: VOCABULARY, connections: CONNECTIONS, 'queries per band and kind': PER_BAND },
});

// ─── the vocabulary ────────────────────────────────────────────────────────────────────────────────────────────

const list = (s: string) => s.trim().split(/\s+/);

/** Ranks 1…: what support mail is mostly made of. Never drawn as a query word (the English half drops most). */
const FUNCTION_WORDS = list(`
the i to and a you it is my for of in that this we on have be with your can not but me was are do if please so at
as our will an or just get from been there they would what when has all any no up out about by am now did still also
could which how here then us them their should some more one know like need see let thanks thank hi hello hey regards
best cheers sorry yes ok again because after before only very same other into than too were had does don't can't i'm
it's i've we're you're there's isn't didn't doesn't won't couldn't`);

/** Support English, roughly most frequent first: the common and upper mid bands. */
const SUPPORT_WORDS = list(`
order account help issue email time problem payment refund invoice card subscription support customer service number
update working access login password app day week today price plan charge charged billing cancel delivery shipping
package address phone message error page website link click button screen settings report data file download upload
install version device browser mobile android iphone windows mac chrome connection network server sync backup export
import integration api key token request response reply ticket status pending resolved urgent asap soon waiting
received sent shipped delivered tracking damaged broken missing wrong item items product products quantity size
colour return exchange replacement warranty receipt discount coupon code promo credit debit bank transfer paypal trial
free premium business enterprise upgrade downgrade renew renewal expired license seat seats user users admin
permission permissions role invite invitation verify verification confirm confirmation reset change changed name
profile photo notification notifications alert reminder calendar meeting call chat contact manager agent colleague
company office store shop checkout cart total amount fee fees tax vat currency dollars euros pounds balance statement
transaction transactions declined approved failed success unable cannot able try tried trying attempt locked blocked
suspended deleted delete remove removed add added create created edit save saved load loading slow crash crashed
freeze bug glitch fix fixed workaround solution steps screenshot attached attachment video details information
question questions answer feedback complaint experience quality disappointed frustrated happy great appreciate
understand explain clarify confused unclear expected instead actually already never always sometimes every each
morning afternoon evening weekend monday tuesday wednesday thursday friday saturday sunday hours minutes days weeks
months year annual monthly yearly weekly daily date deadline schedule appointment booking reservation courier carrier
parcel box label warehouse dispatch customs duty international domestic express standard overnight estimated arrival
late delay delayed lost stolen doorstep neighbour signature dashboard analytics csv pdf spreadsheet template workflow
automation webhook endpoint timeout outage downtime maintenance incident migration domain dns ssl certificate redirect
cookie cache session logout signup register onboarding tutorial documentation guide faq article feature roadmap beta
release bugfix laptop tablet printer router modem cable charger battery keyboard mouse speaker headset camera sensor
adapter firmware driver bluetooth wifi signal storage memory disk space limit quota usage overage upgrade pricing
quote estimate deposit withdraw payout chargeback dispute fraud suspicious security breach hacked compromised
two-factor authentication authenticator sms otp passcode recovery backup-codes username handle identity document
passport upload proof address-change gdpr privacy consent unsubscribe newsletter marketing spam inbox folder filter
rule forwarding alias mailbox calendar-sync contacts import-export duplicate duplicates merge merged split archive
archived restore restored history audit log logs activity timestamp timezone locale language translation english
spanish french german portuguese italian dutch japanese chinese korean currency-conversion exchange-rate pricing-page
invoice-number order-number reference tracking-number serial model warranty-claim repair technician visit onsite
remote screen-share reboot restart reinstall uninstall clear reconnect pair paired unpaired offline online outage-page
status-page escalate escalated supervisor callback voicemail hold wait queue priority critical blocker minor major
severity impact affected customers clients partners vendor supplier contract agreement terms policy refund-policy
return-policy shipping-policy exception approval manager-approval budget purchase purchase-order po procurement`);

/** A few accented words, spliced in at mid ranks: "Déjà vu" has to find "deja vu" (issue 36). */
const ACCENTED = list(`
café déjà vu naïve résumé façade fiancée entrée crème brûlée jalapeño piñata señor señora são paulo zürich münchen
müller ångström björk dvořák kraków łódź málaga córdoba bogotá montréal québec genève besançon nîmes über soufflé
touché cliché protégé exposé rosé détente`);

/** Roots of the long tail: each inflected and prefixed (ship → ships, shipping, shipment, reship, …). */
const ROOTS = list(`
account order refund charge bill pay invoice ship deliver track pack return exchange replace cancel subscribe renew
upgrade install configure connect sync load export import report notify verify confirm register schedule book reserve
print scan update migrate integrate automate archive restore encrypt authenticate authorize approve reject assign
escalate resolve close open merge split filter sort search index label tag flag mark block unlock lock reset recover
remind invite share post publish draft edit format convert compress upload download stream record play pause mute
call dial text chat message mail forward reply quote estimate measure weigh count price discount credit debit deposit
withdraw transfer balance budget plan forecast audit review rate rank score test debug patch deploy build release
launch host serve route cache queue batch process handle manage operate monitor alert log trace profile optimize tune
scale secure protect guard shield comply certify license permit grant revoke expire extend limit throttle device
printer router modem cable charger battery screen keyboard speaker headset camera sensor lamp bulb switch plug socket
adapter bracket mount case cover strap lens cartridge toner ink paper envelope pallet crate bottle jar tube bag sleeve
wallet purse jacket shirt shoe boot sock hat glove scarf ring watch chain pendant mattress pillow blanket sheet towel
chair table desk shelf cabinet drawer sofa couch bed frame door window wall floor roof garden fence gate kettle toaster
blender mixer oven fridge freezer washer dryer vacuum heater fan filter pump valve hose pipe tap sink shower bath
toilet mirror curtain rug carpet tile brick board panel sheetmetal bolt screw nail hinge handle knob lever wheel tire
brake pedal seat helmet saddle rack basket trolley cart ticket voucher gift card coupon token badge pass membership
tier bundle addon module plugin widget theme layout font icon logo banner header footer menu tab panel dialog form
field input column row cell chart graph metric goal target milestone sprint backlog board lane card comment mention
thread channel group team member owner guest visitor lead prospect deal pipeline stage quota commission payroll
salary expense receipt mileage trip travel flight hotel car rental visa passport luggage suitcase gate boarding
terminal platform station stop route fare pickup dropoff driver rider courier parcel freight cargo container vessel
port dock harbour customs broker tariff duty levy fine penalty fee surcharge markup margin profit loss revenue cost
asset liability equity ledger journal entry reconcile settle clear post accrue defer amortize depreciate invest
insure claim cover premium deductible policy broker agent adjust inspect assess appraise value`);

const SUFFIXES_SIMPLE = ['s', 'ed', 'ing', 'er', 'ers'];
const SUFFIXES_DERIVED = ['able', 'ment', 'ments', 'ness', 'less', 'ful', 'ly', 'ion', 'ions', 'ive', 'al', 'ity', 'ation', 'ations', 'ist', 'ize', 'ized', 'izing'];
const PREFIXES = ['re', 'un', 'pre', 'over', 'mis', 'sub', 'auto', 'multi', 'non', 'co', 'de', 'inter', 'micro', 'super'];

/** Product names a message mentions now and then. */
const PRODUCTS = [
  'Acme Cloud', 'PixelPro 3000', 'SyncBox', 'Nimbus X2', 'Orbit Router', 'FlowDesk', 'Quill Editor', 'Zenith Pay', 'Aurora Lamp', 'Vertex Watch',
  'Helix Drive', 'Cobalt Sync', 'Lumen Cam', 'Atlas Backup', 'Nova Phone 12', 'Echo Buds', 'Summit Pack', 'Harbor CRM', 'Beacon Tracker', 'Prism Display',
];
const TAGS = ['billing', 'refund', 'bug', 'feature-request', 'shipping', 'login', 'vip', 'urgent', 'churn-risk', 'onboarding', 'api', 'mobile', 'invoice', 'warranty', 'spam-report', 'security', 'integration', 'feedback', 'returns', 'priority'];
const FIRST_NAMES: [string, string][] = list(`
Maya Liam Olivia Noah Emma Lucas Ava Mateo Sophia Elijah Isabella James Mia Benjamin Amelia Henry Harper Theo Evelyn
Jack Luna Leo Ella Oliver Chloé Ethan Zoë Daniel Renée Samuel José Grace Hugo Nora Felix Ingrid Omar Leila Kenji Yuki
Priya Arjun Wei Mei Carlos Lucía Diego Sofía Andrés Björn Søren Åsa Łukasz Zofia Jiří Tereza François Amélie Jürgen
Anaïs Ravi Anika Tomás Inês Malik Amara Sipho Thandi Kofi Ama Ivan Olga Dmitri Elif Emre Noor Yusuf Hana Minh Linh`).map((n) => [n, ascii(n)]);
const LAST_NAMES: [string, string][] = list(`
Fischer Smith Johnson Williams Brown Jones Garcia Miller Davis Rodríguez Martínez Hernández López González Wilson
Anderson Thomas Taylor Moore Jackson Martin Lee Pérez Thompson White Harris Sánchez Clark Ramírez Lewis Robinson
Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell
Carter Roberts Müller Schröder Weiß Nowak Kowalski Dvořák Novák Lefèvre Dubois Moreau Søndergaard Åberg Lindqvist
Yamamoto Tanaka Kim Park Chen Wang Singh Patel Okafor Mensah Ivanov Petrova Yılmaz Kaya Haddad Rossi Bianchi Costa Silva`).map((n) => [n, ascii(n)]);
const DOMAINS = ['gmail.com', 'outlook.com', 'yahoo.com', 'icloud.com', 'proton.me', 'hotmail.com', 'acme.io', 'globex.com', 'initech.com', 'umbrella.co', 'hooli.com', 'stark.industries', 'wayne.enterprises', 'example.org'];

/** The letters of a name without their accents, for an address (the way people write theirs). */
function ascii(s: string): string {
  return s
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/ł/g, 'l')
    .replace(/Ł/g, 'L')
    .replace(/ø/g, 'o')
    .replace(/ß/g, 'ss')
    .replace(/ı/g, 'i');
}

/** A deterministic 32-bit hash of a string (FNV-1a): the order of the tail for a seed. */
function fnv(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** English spelling enough for a stemmer to fold the forms as it folds real words (charge + ing → charging). */
function inflect(root: string, suffix: string): string {
  if (suffix === '') return root;
  if (root.endsWith('e') && /^[aeiouy]/.test(suffix)) return root.slice(0, -1) + suffix;
  if (/[^aeiou]y$/.test(root) && suffix !== 'ing' && !suffix.startsWith('i')) return `${root.slice(0, -1)}${suffix === 's' ? 'ies' : `i${suffix}`}`;
  return root + suffix;
}

/**
 * The vocabulary by rank (index 0 is rank 1): function words, support words, then the tail (plain inflections
 * of the roots first, then derived forms, then prefixed forms, each class in an order the seed decides), with the
 * accented words spliced in at ranks 700, 760, … (the mid band).
 */
function buildVocabulary(seed: number): string[] {
  const taken = new Set<string>();
  const out: string[] = [];
  const add = (w: string) => {
    const lower = w.toLowerCase();
    if (taken.has(lower)) return;
    taken.add(lower);
    out.push(lower);
  };
  for (const w of FUNCTION_WORDS) add(w);
  for (const w of SUPPORT_WORDS) add(w.replace(/-/g, ' ').split(' ')[0]!);
  for (const w of SUPPORT_WORDS) for (const part of w.split('-')) add(part);
  const accented = ACCENTED.map((w) => w.toLowerCase()).filter((w) => !taken.has(w));
  accented.forEach((w) => taken.add(w));
  const shuffled = (ws: string[]) => ws.map((w) => [fnv(`${seed}:${w}`), w] as const).sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : 1)).map(([, w]) => w);
  const roots = [...new Set(ROOTS)];
  const classes = [
    roots.flatMap((r) => ['', ...SUFFIXES_SIMPLE].map((s) => inflect(r, s))),
    roots.flatMap((r) => SUFFIXES_DERIVED.map((s) => inflect(r, s))),
    roots.flatMap((r) => PREFIXES.flatMap((p) => ['', 's', 'ed', 'ing'].map((s) => p + inflect(r, s)))),
  ];
  for (const c of classes) for (const w of shuffled(c)) if (out.length < VOCABULARY - accented.length) add(w);
  accented.forEach((w, i) => out.splice(699 + i * 60, 0, w));
  if (out.length !== VOCABULARY) throw new Error(`vocabulary has ${out.length} words, not ${VOCABULARY}`);
  const long = out.find((w) => Buffer.byteLength(w) > WIDTH);
  if (long) throw new Error(`"${long}" is longer than ${WIDTH} bytes`);
  return out;
}

const vocabulary = buildVocabulary(SEED);
const rankOf = new Map(vocabulary.map((w, i) => [w, i + 1]));
/** The bands queries are drawn from, by rank; the function words are never a query. */
const FIRST_CONTENT_RANK = new Set(FUNCTION_WORDS).size + 1;
const BANDS = [
  { name: 'common', lo: FIRST_CONTENT_RANK, hi: 500 },
  { name: 'mid', lo: 501, hi: 5_000 },
  { name: 'rare', lo: 5_001, hi: VOCABULARY },
] as const;
type BandName = (typeof BANDS)[number]['name'];
const bandOf = (rank: number): BandName | null => BANDS.find((b) => rank >= b.lo && rank <= b.hi)?.name ?? null;

/** The vocabulary as one fixed-width blob: word r is bytes (r − 1)·WIDTH … r·WIDTH, space-padded. */
function vocabularyBlob(words: string[]): Buffer {
  const blob = Buffer.alloc(words.length * WIDTH, 0x20);
  words.forEach((w, i) => blob.write(w, i * WIDTH, 'utf8'));
  return blob;
}

/** A seeded PRNG (mulberry32): the intake bench's messages and the query draws repeat from run to run. */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A Zipf (s = 1) rank in [lo, hi] for a uniform u: the same formula as the generator's SQL (bench_search.zipf). */
const zipf = (u: number, lo: number, hi: number) => Math.min(hi, Math.floor(lo * Math.exp(u * Math.log((hi + 1) / lo))));

// ─── generation ───────────────────────────────────────────────────────────────────────────────────────────────

/**
 * The generator's helpers, in a schema of the bench's own. Each is one expression, so PostgreSQL inlines it
 * into the statement that calls it.
 */
const HELPERS_SQL = [
  `CREATE SCHEMA IF NOT EXISTS bench_search`,
  // A uniform [0, 1) from a key and a salt (31 bits of hashint8extended).
  `CREATE OR REPLACE FUNCTION bench_search.u(k bigint, salt bigint) RETURNS float8 LANGUAGE sql IMMUTABLE PARALLEL SAFE
     AS $$ SELECT (hashint8extended(k, salt) & 2147483647)::float8 / 2147483648.0 $$`,
  // A rank in [lo, hi] with probability ∝ 1/rank (Zipf, s = 1), by inverting the continuous CDF.
  `CREATE OR REPLACE FUNCTION bench_search.zipf(u float8, lo int, hi int) RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE
     AS $$ SELECT least(hi, floor(lo * exp(u * ln((hi + 1)::float8 / lo)))::int) $$`,
  // A UUIDv7 as src/lib/ids.ts makes them (48-bit milliseconds, version 7, variant 10), the rest from md5(key).
  `CREATE OR REPLACE FUNCTION bench_search.uuid7(at timestamptz, key text) RETURNS uuid LANGUAGE sql IMMUTABLE PARALLEL SAFE
     AS $$ SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7' || substr(md5(key), 1, 3)
                   || substr('89ab', 1 + ascii(substr(md5(key), 4, 1)) % 4, 1) || substr(md5(key), 5, 15))::uuid $$`,
  `CREATE TABLE IF NOT EXISTS bench_search.marker (params jsonb NOT NULL, search text NOT NULL, steps jsonb NOT NULL, generated_at timestamptz NOT NULL DEFAULT now(), owner_user_id uuid NOT NULL, tenant_id uuid NOT NULL)`,
];

/** Salts: each draw of the generator has its own, so two draws from the same key are independent. */
const SALT = { word: 1, length: 2, special: 3, invoice: 4, product: 5, kind: 6, step: 7, status: 8, priority: 9, source: 10, customer: 11, assignee: 12, tags: 13, subjectLength: 14, customerKind: 15, first: 16, last: 17, domain: 18, country: 19, order: 20, assigneeWho: 21, tag1: 22, tag2: 23 };
const salt = (s: number) => SEED * 1000 + s;

/**
 * SQL for `n` words of the vocabulary (the blob is parameter $1) drawn Zipf over ranks [lo, hi], keyed by `key`:
 * one fixed-width substring per word, joined as bytes and decoded once.
 */
const wordsSql = (key: string, n: string, lo: number, hi: number) => `
  (SELECT convert_from(string_agg(rtrim(substring($1::bytea FROM (bench_search.zipf(bench_search.u((${key}) * 64 + w, ${salt(SALT.word)}), ${lo}, ${hi}) - 1) * ${WIDTH} + 1 FOR ${WIDTH}), '\\x20'::bytea), '\\x20'::bytea), 'UTF8')
   FROM generate_series(1, ${n}) w)`;

const sqlText = (s: string) => `'${s.replace(/'/g, "''")}'`;
const sqlArray = (xs: string[]) => `ARRAY[${xs.map(sqlText).join(', ')}]`;
const pick = (xs: string[], u: string) => `(${sqlArray(xs)})[1 + floor(${u} * ${xs.length})::int]`;

/** What a message body ends with now and then: an invoice number (4 %), a product (3 %), an order number (1 %). */
const specialSql = (key: string) => `
  CASE WHEN bench_search.u(${key}, ${salt(SALT.special)}) < 0.04 THEN ' invoice INV-' || (1000 + floor(bench_search.u(${key}, ${salt(SALT.invoice)}) * 9000)::int)
       WHEN bench_search.u(${key}, ${salt(SALT.special)}) < 0.07 THEN ' ' || ${pick(PRODUCTS, `bench_search.u(${key}, ${salt(SALT.product)})`)}
       WHEN bench_search.u(${key}, ${salt(SALT.special)}) < 0.08 THEN ' order #' || (100000 + floor(bench_search.u(${key}, ${salt(SALT.order)}) * 900000)::int)
       ELSE '' END`;

/** A message body: 6–40 words (23 on average) plus its special, keyed by the event's key. */
const bodySql = (key: string) => `(${wordsSql(key, `6 + floor(bench_search.u(${key}, ${salt(SALT.length)}) * 35)::int`, 1, VOCABULARY)} || ${specialSql(key)})`;

/** Events per ticket: 1 … 2R − 1 (R = EVENTS ÷ TICKETS), evenly over every 2R − 1 consecutive tickets. */
const EVENTS_PER_TICKET = Math.max(1, Math.round(EVENTS / TICKETS));
const eventsOfSql = (g: string) => `(1 + ((${g}) * 7) % ${2 * EVENTS_PER_TICKET - 1})`;
const ticketAtSql = (g: string) => `(timestamptz '${EPOCH}' + ((${g}) - 1) * interval '${(730 * 86400) / TICKETS} seconds')`;
const customerAtSql = (n: string) => `(timestamptz '${EPOCH}' - interval '365 days' + ((${n}) - 1) * interval '${(365 * 86400) / CUSTOMERS} seconds')`;
const customerIdSql = (n: string) => `bench_search.uuid7(${customerAtSql(n)}, '${SEED}:c:' || (${n}))`;
const ticketIdSql = (g: string) => `bench_search.uuid7(${ticketAtSql(g)}, '${SEED}:t:' || (${g}))`;
/** A customer's kind: 65 % known by email only, 25 % by phone only, 10 % both. */
const customerKindSql = (n: string) => `CASE WHEN bench_search.u(${n}, ${salt(SALT.customerKind)}) < 0.65 THEN 'email' WHEN bench_search.u(${n}, ${salt(SALT.customerKind)}) < 0.90 THEN 'phone' ELSE 'both' END`;
/** Minutes between a ticket's messages: 5 minutes to 8 hours. */
const stepSql = (g: string) => `(interval '5 minutes' + bench_search.u(${g}, ${salt(SALT.step)}) * interval '8 hours')`;
/** A ticket's channel follows its customer: a phone-only customer writes by SMS or WhatsApp. */
const sourceSql = (g: string, n: string) => `
  CASE WHEN ${customerKindSql(n)} = 'phone' THEN CASE WHEN bench_search.u(${g}, ${salt(SALT.source)}) < 0.7 THEN 'sms' ELSE 'whatsapp' END
       ELSE ${pick(['email', 'email', 'email', 'email', 'email', 'email', 'web_chat', 'web_chat', 'api', 'telegram'], `bench_search.u(${g}, ${salt(SALT.source)})`)} END`;
const ticketCustomerSql = (g: string) => `(1 + floor(bench_search.u(${g}, ${salt(SALT.customer)}) * ${CUSTOMERS})::int)`;

interface Step {
  step: string;
  seconds: number;
}

/** Runs `fn` for every batch [lo, hi] of 1…total on `clients` (one statement each), printing progress. */
async function inBatches(clients: Client[], total: number, what: string, fn: (c: Client, lo: number, hi: number) => Promise<void>) {
  let next = 1;
  let done = 0;
  const started = performance.now();
  await Promise.all(
    clients.map(async (c) => {
      while (next <= total) {
        const lo = next;
        const hi = Math.min(total, lo + BATCH - 1);
        next = hi + 1;
        await fn(c, lo, hi);
        done += hi - lo + 1;
        const line = `  ${what}: ${done.toLocaleString('en-US')} / ${total.toLocaleString('en-US')}, ${((performance.now() - started) / 1000).toFixed(0)} s`;
        // On a terminal one line counts up; in a log (npm run bench, nohup) a line at each quarter.
        if (process.stdout.isTTY) process.stdout.write(`\r${line}`);
        else if (Math.floor((done * 4) / total) > Math.floor(((done - (hi - lo + 1)) * 4) / total)) console.log(line);
      }
    }),
  );
  if (process.stdout.isTTY) process.stdout.write('\n');
}

/** Non-constraint indexes of tables, to drop before a bulk load and create again after it. */
async function secondaryIndexes(c: Client, tables: string[]): Promise<{ name: string; def: string }[]> {
  const { rows } = await c.query<{ name: string; def: string }>(
    `SELECT i.indexname AS name, i.indexdef AS def FROM pg_indexes i
     WHERE i.schemaname = 'public' AND i.tablename = ANY($1)
       AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = (quote_ident(i.schemaname) || '.' || quote_ident(i.indexname))::regclass)`,
    [tables],
  );
  return rows;
}

/** The search triggers (migration 0038 names them all `search_*`), with their tables. */
async function searchTriggers(c: Client): Promise<{ table: string; name: string }[]> {
  const { rows } = await c.query<{ table: string; name: string }>(
    `SELECT tgrelid::regclass::text AS table, tgname AS name FROM pg_trigger WHERE NOT tgisinternal AND tgname LIKE 'search\\_%' ORDER BY 1, 2`,
  );
  return rows;
}

async function setSearchTriggers(c: Client, enabled: boolean) {
  for (const t of await searchTriggers(c)) await c.query(`ALTER TABLE ${t.table} ${enabled ? 'ENABLE' : 'DISABLE'} TRIGGER ${t.name}`);
}

const tableExists = async (c: Client, name: string) => (await c.query(`SELECT to_regclass($1) IS NOT NULL AS ok`, [name])).rows[0].ok as boolean;

/** What the generator was asked for: a kept database is reused only when this is equal. */
function datasetParams() {
  return {
    seed: SEED,
    tickets: TICKETS,
    events: EVENTS,
    customers: CUSTOMERS,
    vocabulary: createHash('sha256').update(vocabulary.join('\n')).digest('hex').slice(0, 16),
    generator: GENERATOR_VERSION,
  };
}

/**
 * What search is made of in a database, as one hash: the search_* functions and triggers, the indexes of
 * ticket_search and every trigram or search_* expression index, the hd_* text search configurations. A kept
 * database whose hash differs after migrating (the engine changed how a document is built or indexed) holds stale
 * documents and is generated again; a migration that touches none of these (another issue's) is applied to it.
 */
async function searchDefinitions(c: Client): Promise<string> {
  const { rows } = await c.query<{ hash: string | null }>(
    `SELECT md5(string_agg(d, E'\\n' ORDER BY d)) AS hash FROM (
       SELECT pg_get_functiondef(p.oid) AS d FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'search\\_%' AND p.prokind = 'f'
       UNION ALL SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t WHERE NOT t.tgisinternal AND t.tgname LIKE 'search\\_%'
       UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND (tablename = 'ticket_search' OR indexdef LIKE '%gin_trgm_ops%' OR indexdef LIKE '%search\\_%')
       UNION ALL SELECT c.cfgname || ' ' || m.maptokentype || ' ' || m.mapseqno || ' ' || m.mapdict::regdictionary
                 FROM pg_ts_config_map m JOIN pg_ts_config c ON c.oid = m.mapcfg WHERE c.cfgname LIKE 'hd\\_%'
     ) x`,
  );
  return rows[0]?.hash ?? 'none';
}

interface Dataset {
  url: string;
  tenantId: string;
  ownerUserId: string;
  steps: Step[];
  reused: boolean;
  generatedAt: string;
}

/**
 * The generated database: the kept one when it was generated with the same parameters and, once migrated to the
 * code's latest migration, its search definitions are the ones it was generated under; else a new one.
 */
async function dataset(): Promise<Dataset> {
  const url = benchDatabaseUrl(DATABASE);
  const params = datasetParams();
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const adminClient = new Client({ connectionString: admin.toString() });
  await adminClient.connect();
  const exists = (await adminClient.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [DATABASE])).rowCount === 1;
  await adminClient.end();
  if (exists) {
    const reused = await reuse(url.toString(), params);
    if (reused) return reused;
  }
  await dropBenchDatabase(url);
  await ensureDatabase(url.toString());
  return generate(url.toString(), params);
}

/** JSON with the keys sorted: jsonb gives an object's keys back in its own order, not in the order written. */
const canonical = (x: unknown) => JSON.stringify(x, (_, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v));

async function reuse(url: string, params: ReturnType<typeof datasetParams>): Promise<Dataset | null> {
  const c = new Client({ connectionString: url });
  await c.connect();
  try {
    if (!(await tableExists(c, 'bench_search.marker'))) return null;
    const m = (await c.query(`SELECT params FROM bench_search.marker`)).rows[0] as { params: unknown } | undefined;
    if (!m || canonical(m.params) !== canonical(params)) {
      console.log(`${DATABASE} was generated with other parameters (${JSON.stringify(m?.params ?? null)}): generating it again`);
      return null;
    }
    const handle = createDb(loadConfig({ ...benchEnv(url, 'search'), PG_STATEMENT_TIMEOUT_MS: '600000' }));
    try {
      const applied = await migrateToLatest(handle.db);
      if (applied.length) console.log(`${DATABASE}: migrations applied since it was generated: ${applied.join(', ')}`);
    } catch (err) {
      console.log(`${DATABASE} cannot be migrated to this code's migrations (${(err as Error).message}): generating it again`);
      return null;
    } finally {
      await handle.close();
    }
    const { rows } = await c.query(`SELECT search, steps, generated_at, owner_user_id, tenant_id FROM bench_search.marker`);
    const k = rows[0] as { search: string; steps: Step[]; generated_at: Date; owner_user_id: string; tenant_id: string };
    if ((await searchDefinitions(c)) !== k.search) {
      console.log(`${DATABASE}: the search functions, triggers or indexes changed since it was generated: generating it again`);
      return null;
    }
    console.log(`reusing ${DATABASE}, generated ${k.generated_at.toISOString()} with the same parameters and search definitions`);
    return { url, tenantId: k.tenant_id, ownerUserId: k.owner_user_id, steps: k.steps, reused: true, generatedAt: k.generated_at.toISOString() };
  } finally {
    await c.end();
  }
}

async function generate(url: string, params: ReturnType<typeof datasetParams>): Promise<Dataset> {
  const steps: Step[] = [];
  const step = async (name: string, fn: () => Promise<unknown>) => {
    const t0 = performance.now();
    await fn();
    const seconds = (performance.now() - t0) / 1000;
    steps.push({ step: name, seconds });
    console.log(`  ${name}: ${seconds.toFixed(1)} s`);
  };
  console.log(`generating ${DATABASE}: ${TICKETS.toLocaleString('en-US')} tickets, ~${EVENTS.toLocaleString('en-US')} events, ${CUSTOMERS.toLocaleString('en-US')} customers, seed ${SEED}`);
  const env = benchEnv(url, 'search');
  const config = loadConfig(env);
  const handle = createDb(config);
  let ws!: Awaited<ReturnType<ReturnType<typeof createWorkspaceService>['bootstrap']>>;
  await step('migrate and bootstrap the workspace', async () => {
    await migrateToLatest(handle.db);
    const audit = createAuditService({ db: handle.db });
    ws = await createWorkspaceService({ db: handle.db, audit, apiKeys: createApiKeyService({ db: handle.db, config, audit }) }).bootstrap({
      workspace: 'Search bench',
      ownerEmail: 'owner@search.bench.test',
      ownerName: 'Search Bench',
    });
  });
  await handle.close();
  const t = ws.tenant_id;
  // Two connections, one per core: INSERT … SELECT never runs in parallel in PostgreSQL 15, two statements do.
  const clients = [new Client({ connectionString: url }), new Client({ connectionString: url })];
  for (const c of clients) {
    await c.connect();
    await c.query(`SET statement_timeout = 0`);
    await c.query(`SET maintenance_work_mem = '1GB'`);
    // Nothing here needs its commit flushed before the next statement: the load is redone if it is cut short.
    await c.query(`SET synchronous_commit = off`);
  }
  const [c] = clients as [Client, Client];
  for (const s of HELPERS_SQL) await c.query(s);
  const blob = vocabularyBlob(vocabulary);

  // The tables loaded row-set by row-set lose their secondary indexes for the load and get them back in one
  // sorted build each (ticket_search after its documents, which are read through the others' indexes).
  const loaded = ['customers', 'customer_handles', 'tickets', 'ticket_events'];
  const dropped = await secondaryIndexes(c, loaded);
  const triggers = await searchTriggers(c);
  await step(`drop ${dropped.length} secondary indexes, disable ${triggers.length} search triggers`, async () => {
    for (const i of dropped) await c.query(`DROP INDEX ${i.name}`);
    await setSearchTriggers(c, false);
  });
  /** Creates indexes again, two at a time (one per connection, so both cores build). */
  const rebuild = async (indexes: { name: string; def: string }[]) => {
    const queue = [...indexes];
    await Promise.all(
      clients.map(async (cl) => {
        for (let i = queue.shift(); i; i = queue.shift()) {
          const t0 = performance.now();
          await cl.query(i.def);
          console.log(`    ${i.name}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        }
      }),
    );
  };

  const agents = 20;
  let agentIds: string[] = [];
  await step(`${agents} agents`, async () => {
    const { rows } = await c.query<{ id: string }>(
      `INSERT INTO users (id, email, name)
       SELECT bench_search.uuid7(timestamptz '${EPOCH}' - interval '400 days', '${SEED}:a:' || g), 'agent' || g || '-' || $1 || '@search.bench.test',
              ${pick(FIRST_NAMES.map(([n]) => n), `bench_search.u(g, ${salt(SALT.first)})`)} || ' ' || ${pick(LAST_NAMES.map(([n]) => n), `bench_search.u(g, ${salt(SALT.last)})`)}
       FROM generate_series(1, ${agents}) g RETURNING id`,
      [t],
    );
    agentIds = rows.map((r) => r.id);
    await c.query(`INSERT INTO memberships (tenant_id, user_id, role) SELECT $1, unnest($2::uuid[]), 'editor'`, [t, agentIds]);
  });

  await step(`${CUSTOMERS.toLocaleString('en-US')} customers`, () =>
    inBatches(clients, CUSTOMERS, 'customers', async (cl, lo, hi) => {
      await cl.query(
        `INSERT INTO customers (id, tenant_id, display_name, email, company, country, created_at, updated_at)
         SELECT ${customerIdSql('n')}, $1, f.name || ' ' || l.name,
                CASE WHEN ${customerKindSql('n')} = 'phone' THEN ''
                     ELSE lower(f.plain) || '.' || lower(l.plain) || n || '@' || ${pick(DOMAINS, `bench_search.u(n, ${salt(SALT.domain)})`)} END,
                '', '', ${customerAtSql('n')}, ${customerAtSql('n')}
         FROM generate_series(${lo}, ${hi}) n
         CROSS JOIN LATERAL (SELECT ${pick(FIRST_NAMES.map(([n]) => n), `bench_search.u(n, ${salt(SALT.first)})`)} AS name, ${pick(FIRST_NAMES.map(([, a]) => a), `bench_search.u(n, ${salt(SALT.first)})`)} AS plain) f
         CROSS JOIN LATERAL (SELECT ${pick(LAST_NAMES.map(([n]) => n), `bench_search.u(n, ${salt(SALT.last)})`)} AS name, ${pick(LAST_NAMES.map(([, a]) => a), `bench_search.u(n, ${salt(SALT.last)})`)} AS plain) l`,
        [t],
      );
    }),
  );

  // E.164 numbers, distinct by construction: the national number is n·a mod m plus an offset, a bijection on
  // 0 … m − 1 when a and m are coprime (every multiplier here is odd and not a multiple of 5).
  await step('phone handles (35 % of customers)', () =>
    inBatches(clients, CUSTOMERS, 'phone handles', async (cl, lo, hi) => {
      await cl.query(
        `INSERT INTO customer_handles (tenant_id, kind, handle, customer_id)
         SELECT $1, 'phone',
                CASE WHEN cc < 0.6 THEN '+1' || (2000000000 + (n::bigint * 2654435761) % 7999999999)
                     WHEN cc < 0.75 THEN '+447' || lpad(((n::bigint * 2246822519) % 1000000000)::text, 9, '0')
                     WHEN cc < 0.85 THEN '+4915' || lpad(((n::bigint * 3266489917) % 1000000000)::text, 9, '0')
                     WHEN cc < 0.95 THEN '+336' || lpad(((n::bigint * 668265263) % 100000000)::text, 8, '0')
                     ELSE '+614' || lpad(((n::bigint * 374761393) % 100000000)::text, 8, '0') END,
                ${customerIdSql('n')}
         FROM generate_series(${lo}, ${hi}) n, LATERAL (SELECT bench_search.u(n, ${salt(SALT.country)}) AS cc) x
         WHERE ${customerKindSql('n')} <> 'email'`,
        [t],
      );
    }),
  );

  const policy = (await c.query<{ id: string }>(`SELECT id FROM sla_policies WHERE tenant_id = $1 AND is_default`, [t])).rows[0]!.id;
  await step(`${TICKETS.toLocaleString('en-US')} tickets`, () =>
    inBatches(clients, TICKETS, 'tickets', async (cl, lo, hi) => {
      await cl.query(
        `INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, assignee_id, tags, sla_policy_id,
                              first_response_due, resolution_due, first_responded_at, solved_at, created_at, updated_at)
         SELECT ${ticketIdSql('g')}, $2,
                ${wordsSql('-g', `3 + floor(bench_search.u(g, ${salt(SALT.subjectLength)}) * 6)::int`, FIRST_CONTENT_RANK, VOCABULARY)},
                ${bodySql('g * 32 + 1')},
                x.status, ${pick(['low', 'normal', 'normal', 'normal', 'high', 'urgent'], `bench_search.u(g, ${salt(SALT.priority)})`)},
                ${sourceSql('g', 'x.n')}, ${customerIdSql('x.n')},
                CASE WHEN bench_search.u(g, ${salt(SALT.assignee)}) < 0.75 THEN ($3::uuid[])[1 + floor(bench_search.u(g, ${salt(SALT.assigneeWho)}) * ${agents})::int] END,
                CASE WHEN bench_search.u(g, ${salt(SALT.tags)}) < 0.5 THEN '{}'::text[]
                     WHEN bench_search.u(g, ${salt(SALT.tags)}) < 0.85 THEN ARRAY[${pick(TAGS, `bench_search.u(g, ${salt(SALT.tag1)})`)}]
                     ELSE ARRAY[${pick(TAGS.slice(0, 10), `bench_search.u(g, ${salt(SALT.tag1)})`)}, ${pick(TAGS.slice(10), `bench_search.u(g, ${salt(SALT.tag2)})`)}] END,
                $4, ${ticketAtSql('g')} + interval '4 hours', ${ticketAtSql('g')} + interval '1 day',
                CASE WHEN ${eventsOfSql('g')} > 1 THEN ${ticketAtSql('g')} + ${stepSql('g')} END,
                CASE WHEN x.status IN ('solved', 'closed') THEN x.last END,
                ${ticketAtSql('g')}, x.last
         FROM generate_series(${lo}, ${hi}) g
         CROSS JOIN LATERAL (SELECT ${ticketCustomerSql('g')} AS n,
                                    ${pick(['open', 'open', 'open', 'pending', 'pending', 'on_hold', 'solved', 'solved', 'solved', 'solved', 'solved', 'solved', 'closed', 'closed', 'closed', 'closed', 'closed', 'closed', 'closed', 'spam'], `bench_search.u(g, ${salt(SALT.status)})`)} AS status,
                                    ${ticketAtSql('g')} + (${eventsOfSql('g')} - 1) * ${stepSql('g')} AS last) x`,
        [blob, t, agentIds, policy],
      );
    }),
  );

  // Event j of ticket g: the first is the opening message (its body is the description); after it 8 % status
  // changes, then inbound messages, replies and internal notes.
  const agentNames = (await c.query<{ id: string; name: string }>(`SELECT id, name FROM users WHERE id = ANY($1)`, [agentIds])).rows;
  const nameOf = new Map(agentNames.map((r) => [r.id, r.name]));
  await step(`~${EVENTS.toLocaleString('en-US')} ticket events`, () =>
    inBatches(clients, TICKETS, 'ticket events', async (cl, lo, hi) => {
      await cl.query(
        `INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, actor_user_id, actor_name, created_at)
         SELECT bench_search.uuid7(e.at, '${SEED}:e:' || e.k), $2, e.ticket_id, e.kind,
                CASE WHEN e.kind = 'status_changed' THEN '' ELSE ${bodySql('e.k')} END,
                CASE WHEN e.kind LIKE 'inbound\\_%' THEN jsonb_build_object('provider_message_id',
                       CASE e.source WHEN 'sms' THEN 'SM' || md5(e.k::text) WHEN 'whatsapp' THEN 'wamid.' || upper(md5(e.k::text))
                                     WHEN 'telegram' THEN e.k::text ELSE bench_search.uuid7(e.at, 'm' || e.k)::text END)
                     WHEN e.kind = 'status_changed' THEN jsonb_build_object('from', 'open', 'to', 'pending')
                     ELSE '{}'::jsonb END,
                CASE WHEN e.kind LIKE 'inbound\\_%' THEN 'customer' ELSE 'user' END,
                CASE WHEN e.kind LIKE 'inbound\\_%' THEN NULL ELSE e.agent END,
                CASE WHEN e.kind LIKE 'inbound\\_%' THEN NULL ELSE ($4::text[])[array_position($3::uuid[], e.agent)] END,
                e.at
         FROM (
           SELECT g * 32 + j AS k, ${ticketIdSql('g')} AS ticket_id, ${ticketAtSql('g')} + (j - 1) * ${stepSql('g')} AS at, s.source,
                  ($3::uuid[])[1 + floor(bench_search.u(g * 32 + j, ${salt(SALT.assignee)}) * ${agents})::int] AS agent,
                  CASE WHEN j = 1 THEN CASE WHEN s.source = 'api' THEN 'ticket_created' ELSE 'inbound_' || s.source END
                       WHEN bench_search.u(g * 32 + j, ${salt(SALT.kind)}) < 0.08 THEN 'status_changed'
                       WHEN bench_search.u(g * 32 + j, ${salt(SALT.kind)}) < 0.55 THEN CASE WHEN s.source = 'api' THEN 'inbound_email' ELSE 'inbound_' || s.source END
                       WHEN bench_search.u(g * 32 + j, ${salt(SALT.kind)}) < 0.88 THEN 'reply'
                       ELSE 'internal_note' END AS kind
           FROM generate_series(${lo}, ${hi}) g
           CROSS JOIN LATERAL (SELECT ${sourceSql('g', ticketCustomerSql('g'))} AS source) s
           CROSS JOIN LATERAL generate_series(1, ${eventsOfSql('g')}) j
         ) e`,
        [blob, t, agentIds, agentIds.map((id) => nameOf.get(id) ?? null)],
      );
    }),
  );

  await step(`create the ${dropped.length} secondary indexes again`, () => rebuild(dropped));

  if (await tableExists(c, 'public.ticket_search')) {
    const searchIndexes = await secondaryIndexes(c, ['ticket_search']);
    for (const i of searchIndexes) await c.query(`DROP INDEX ${i.name}`);
    // The documents as the triggers would have built them: the engine's own function, ticket by ticket (its
    // reads are index probes), in batches by creation time on both connections.
    await step('ticket_search: search_ticket_doc per ticket', () =>
      inBatches(clients, TICKETS, 'ticket_search', async (cl, lo, hi) => {
        await cl.query(
          `INSERT INTO ticket_search (tenant_id, ticket_id, doc)
           SELECT tenant_id, id, search_ticket_doc(tenant_id, id) FROM tickets
           WHERE tenant_id = $1 AND created_at >= ${ticketAtSql(String(lo))} AND created_at < ${ticketAtSql(String(hi + 1))}`,
          [t],
        );
      }),
    );
    await step(`ticket_search: create its ${searchIndexes.length} index(es)`, () => rebuild(searchIndexes));
  } else {
    console.log('  (no ticket_search table: migration 0038 is not there yet; no documents built)');
  }
  await step('enable the search triggers', () => setSearchTriggers(c, true));
  await step('VACUUM ANALYZE', async () => {
    for (const table of [...loaded, 'ticket_search']) if (await tableExists(c, `public.${table}`)) await c.query(`VACUUM ANALYZE ${table}`);
  });
  await c.query(`INSERT INTO bench_search.marker (params, search, steps, owner_user_id, tenant_id) VALUES ($1, $2, $3, $4, $5)`, [
    JSON.stringify(params),
    await searchDefinitions(c),
    JSON.stringify(steps),
    ws.owner_user_id,
    t,
  ]);
  for (const cl of clients) await cl.end();
  return { url, tenantId: t, ownerUserId: ws.owner_user_id, steps, reused: false, generatedAt: new Date().toISOString() };
}

// ─── queries ──────────────────────────────────────────────────────────────────────────────────────────────────

interface Query {
  /** What is measured together: `words`, `phrases`, `status:open`, `invoice numbers`, `customers: email`, … */
  kind: string;
  band: BandName | null;
  /** The text of `q` (null for the plain list). */
  q: string | null;
  path: string;
}

interface Sample extends Query {
  ms: number;
  status: number;
  rows: number;
}

/** Message bodies from a repeatable sample of the timeline (about 20,000 rows, whatever the size). */
async function sampleBodies(c: Client, tenantId: string): Promise<string[]> {
  const percent = Math.min(100, (20_000 / Math.max(1, EVENTS)) * 100);
  const { rows } = await c.query<{ body: string }>(
    `SELECT body FROM ticket_events TABLESAMPLE SYSTEM (${percent}) REPEATABLE (${SEED}) WHERE tenant_id = $1 AND kind <> 'status_changed' AND body <> ''`,
    [tenantId],
  );
  return rows.map((r) => r.body);
}

/**
 * The ticket queries, drawn from real message bodies so each finds at least the ticket it came from, the way an
 * agent searches for a conversation they remember: 1–3 words of one band taken from one message; a phrase of
 * 2–3 adjacent words of that message (words of the vocabulary past the function words), its band the rarest
 * word's; the same word queries with `status:open`; invoice numbers as written (`INV-4471`).
 */
function ticketQueries(bodies: string[], seed = SEED * 7919): Query[] {
  const random = prng(seed);
  const order = bodies.map((b) => [random(), b] as const).sort((a, b) => a[0] - b[0]).map(([, b]) => b);
  const seen = new Set<string>();
  const out: Query[] = [];
  const add = (kind: string, band: BandName | null, q: string) => {
    if (seen.has(`${kind}|${q}`)) return false;
    seen.add(`${kind}|${q}`);
    out.push({ kind, band, q, path: `/v1/tickets?q=${encodeURIComponent(q)}` });
    return true;
  };
  const content = (w: string) => {
    const r = rankOf.get(w);
    return r !== undefined && r >= FIRST_CONTENT_RANK && /^[\p{L}]+$/u.test(w) ? r : null;
  };
  for (const [kind, suffix] of [
    ['words', ''],
    ['status:open', ' status:open'],
  ] as const) {
    const perBand = kind === 'words' ? PER_BAND : Math.ceil(PER_BAND / BANDS.length);
    for (const band of BANDS) {
      let made = 0;
      for (let i = 0; made < perBand && i < order.length; i++) {
        const terms = 1 + (made % 3);
        const words = [...new Set(order[i]!.split(' ').filter((w) => bandOf(content(w) ?? 0) === band.name))];
        if (words.length < terms) continue;
        const chosen: string[] = [];
        while (chosen.length < terms) chosen.push(...words.splice(Math.floor(random() * words.length), 1));
        if (add(kind, band.name, chosen.join(' ') + suffix)) made += 1;
      }
    }
  }
  const phrasesIn = BANDS.map(() => 0);
  for (let i = 0; phrasesIn.some((n) => n < PER_BAND) && i < order.length; i++) {
    const tokens = order[order.length - 1 - i]!.split(' ');
    const length = 2 + (i % 2);
    for (let at = 0; at + length <= tokens.length; at++) {
      const ranks = tokens.slice(at, at + length).map(content);
      if (ranks.some((r) => r === null)) continue;
      const band = BANDS.findIndex((b) => b.name === bandOf(Math.max(...(ranks as number[]))));
      if (band < 0 || phrasesIn[band]! >= PER_BAND) continue;
      if (add('phrases', BANDS[band]!.name, `"${tokens.slice(at, at + length).join(' ')}"`)) phrasesIn[band]! += 1;
      break;
    }
  }
  const invoices = [...new Set(bodies.flatMap((b) => b.match(/INV-\d{4}/g) ?? []))];
  for (const inv of invoices.slice(0, PER_BAND)) add('invoice numbers', null, inv);
  return out;
}

/**
 * Customer fragments, from a repeatable sample of the customers: the start of an email's local part, or the
 * surname with the first digits after it (`fischer41`); a phone number's digits written another way than stored
 * (`(415) 555-01`, `555-0100`, `415 555 0100` for +14155550100).
 */
async function customerQueries(c: Client, tenantId: string): Promise<Query[]> {
  const percent = Math.min(100, (20_000 / Math.max(1, CUSTOMERS)) * 100);
  const { rows } = await c.query<{ email: string; handle: string | null }>(
    `SELECT c.email, (SELECT h.handle FROM customer_handles h WHERE h.tenant_id = c.tenant_id AND h.customer_id = c.id AND h.kind = 'phone' LIMIT 1) AS handle
     FROM customers c TABLESAMPLE SYSTEM (${percent}) REPEATABLE (${SEED}) WHERE c.tenant_id = $1`,
    [tenantId],
  );
  const random = prng(SEED * 104729);
  const out: Query[] = [];
  const add = (kind: string, q: string) => out.push({ kind, band: null, q, path: `/v1/customers/search?q=${encodeURIComponent(q)}` });
  for (const r of rows.filter((x) => x.email !== '').slice(0, PER_BAND)) {
    const local = r.email.split('@')[0]!;
    const [first, rest] = local.split('.') as [string, string];
    if (random() < 0.5) add('customers: email fragment', local.slice(0, Math.min(local.length, first.length + 2 + Math.floor(random() * 4))));
    else add('customers: email fragment', rest.slice(0, rest.search(/\d/) + 1 + Math.floor(random() * 2)));
  }
  for (const r of rows.filter((x) => x.handle !== null).slice(0, PER_BAND)) {
    const h = r.handle!;
    const national = h.startsWith('+1') ? h.slice(2) : h.slice(3);
    const form = Math.floor(random() * 3);
    if (form === 0) add('customers: phone fragment', `(${national.slice(0, 3)}) ${national.slice(3, 6)}-${national.slice(6, 8)}`);
    else if (form === 1) add('customers: phone fragment', `${national.slice(-7, -4)}-${national.slice(-4)}`);
    else add('customers: phone fragment', `${national.slice(0, 3)} ${national.slice(3, 6)} ${national.slice(6)}`);
  }
  return out;
}

/** Runs the queries `connections` at a time against the API, each timed from request to the whole body read. */
async function measure(base: string, key: string, queries: Query[], connections: number): Promise<Sample[]> {
  const samples: Sample[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < queries.length) {
        const q = queries[next++]!;
        const t0 = performance.now();
        const res = await fetch(base + q.path, { headers: { authorization: `Bearer ${key}` } });
        const text = await res.text();
        const ms = performance.now() - t0;
        let rows = 0;
        if (res.ok) rows = (Object.values(JSON.parse(text) as Record<string, unknown>).find(Array.isArray) as unknown[] | undefined)?.length ?? 0;
        samples.push({ ...q, ms, status: res.status, rows });
      }
    }),
  );
  return samples;
}

const ms = (x: number) => `${x.toFixed(0)} ms`;
const percentiles = (xs: number[]) => ({ p50: quantile(xs, 0.5), p95: quantile(xs, 0.95), p99: quantile(xs, 0.99) });

/**
 * The SQL the engine sends for a query, without running it: the engine is given a Kysely whose connection only
 * records what it is asked to run. Its main statement is then run again under EXPLAIN to count the tickets it
 * ranked and to show where the time goes.
 */
async function engineSql(tenantId: string, viewerId: string, q: string): Promise<{ sql: string; parameters: unknown[] }> {
  const seen: { sql: string; parameters: unknown[] }[] = [];
  const client = {
    query: async (sql: string, parameters: unknown[]) => {
      seen.push({ sql, parameters });
      return { command: 'SELECT', rowCount: 0, rows: [] };
    },
    release: () => {},
  };
  const recorder = new Kysely<Database>({ dialect: new PostgresDialect({ pool: { connect: async () => client, end: async () => {} } as never }) });
  await createPgTicketSearch({ timeoutMs: 60_000 }).searchTickets(recorder, tenantId, parseTicketQuery(q, SEARCH_LIMIT_CEILING), {}, { limit: 50, sort: 'relevance' }, { userId: viewerId });
  await recorder.destroy();
  const main = seen.find((s) => /ticket_search/.test(s.sql) && /^\s*select/i.test(s.sql));
  if (!main) throw new Error(`the engine sent no search statement for ${q}`);
  return main;
}

interface PlanNode {
  'Node Type': string;
  'Actual Rows'?: number;
  Plans?: PlanNode[];
}

/** How many tickets the statement ranked: the rows into its Sort (the page is cut after it), and its execution time. */
async function explainCount(c: Client, stmt: { sql: string; parameters: unknown[] }): Promise<{ ranked: number; executionMs: number } | null> {
  try {
    const { rows } = await c.query(`EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${stmt.sql}`, stmt.parameters);
    const plan = (rows[0] as { 'QUERY PLAN': { Plan: PlanNode; 'Execution Time': number }[] })['QUERY PLAN'][0]!;
    const find = (n: PlanNode): PlanNode | null => (n['Node Type'] === 'Sort' ? n : (n.Plans ?? []).map(find).find(Boolean) ?? null);
    const sort = find(plan.Plan);
    return { ranked: sort?.Plans?.[0]?.['Actual Rows'] ?? NaN, executionMs: plan['Execution Time'] };
  } catch (err) {
    if ((err as { code?: string }).code === '57014') return null;
    throw err;
  }
}

async function queryLatency(data: Dataset, owner: { key: string }) {
  const c = new Client({ connectionString: data.url });
  await c.connect();
  const bodies = await sampleBodies(c, data.tenantId);
  const tickets = ticketQueries(bodies);
  const customers = await customerQueries(c, data.tenantId);
  const env: Env = benchEnv(data.url, 'search', { PG_POOL_MAX: process.env.PG_POOL_MAX ?? '16' });
  const api = await start('src/server.ts', { ...env, PORT: String(PORT) }, null, PORT);
  const base = `http://127.0.0.1:${PORT}`;
  const baseline: Query[] = Array.from({ length: PER_BAND * BANDS.length }, () => ({ kind: 'baseline: GET /v1/tickets first page', band: null, q: null, path: '/v1/tickets' }));

  // A warm-up of every kind (its own queries, never measured): the API's first requests and the cold pages of the
  // indexes are start-up costs, not the steady state measured here.
  const warm = [...ticketQueries(bodies, SEED * 7919 + 1).filter((_, i) => i % 10 === 0), ...customers.filter((_, i) => i % 10 === 0), ...baseline.slice(0, 30)];
  const t0 = performance.now();
  await measure(base, owner.key, warm, CONNECTIONS);
  console.log(`warm-up: ${warm.length} requests in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const kinds = ['baseline: GET /v1/tickets first page', 'words', 'phrases', 'status:open', 'invoice numbers', 'customers: email fragment', 'customers: phone fragment'];
  const all = [...baseline, ...tickets, ...customers];
  const samples: Sample[] = [];
  for (const kind of kinds) {
    const qs = all.filter((q) => q.kind === kind);
    const started = performance.now();
    const got = await measure(base, owner.key, qs, CONNECTIONS);
    samples.push(...got);
    const p = percentiles(got.map((s) => s.ms));
    const bad = got.filter((s) => s.status !== 200);
    console.log(
      `${kind.padEnd(40)} ${String(got.length).padStart(4)} requests in ${((performance.now() - started) / 1000).toFixed(1).padStart(5)} s   p50 ${ms(p.p50).padStart(7)}   p95 ${ms(p.p95).padStart(7)}   p99 ${ms(p.p99).padStart(7)}   non-200 ${bad.length}${bad.length ? ` (${[...new Set(bad.map((b) => b.status))].join(', ')})` : ''}`,
    );
  }
  await stop(api);
  return { c, samples };
}
/** A group's figures: "median (min–max) of n". */
const spread = (xs: number[]) => {
  const ok = xs.filter(Number.isFinite);
  if (ok.length === 0) return 'none counted';
  const s = [...ok].sort((a, b) => a - b);
  return `median ${quantile(s, 0.5).toLocaleString('en-US')} (${s[0]!.toLocaleString('en-US')}–${s.at(-1)!.toLocaleString('en-US')}) of ${ok.length}`;
};

const TARGETS: Record<string, { ms: number; text: string } | undefined> = {
  words: { ms: 250, text: 'p95 ≤ 250 ms (issue 36: 1–3-term queries)' },
  'status:open': { ms: 250, text: 'p95 ≤ 250 ms (issue 36: 1–3-term queries, here with a filter)' },
  'invoice numbers': { ms: 250, text: 'p95 ≤ 250 ms (issue 36: 1-term queries)' },
  phrases: { ms: 400, text: 'p95 ≤ 400 ms (issue 36: phrase queries)' },
  'customers: email fragment': { ms: 100, text: 'p95 ≤ 100 ms (issue 36: customer fragment search)' },
  'customers: phone fragment': { ms: 100, text: 'p95 ≤ 100 ms (issue 36: customer fragment search)' },
};

/**
 * The latency figures, each against the plain list's same percentile; then, for COUNTED queries of each kind and
 * band, the tickets the engine's statement ranked and its execution time in PostgreSQL (EXPLAIN ANALYZE), and the
 * plan of the slowest query of each kind, printed whole.
 */
async function latencyFigures(c: Client, data: Dataset, samples: Sample[]) {
  const baseline = samples.filter((s) => s.q === null);
  const b = percentiles(baseline.map((s) => s.ms));
  report.figure({ name: 'baseline: GET /v1/tickets first page (no q): p50', value: b.p50, unit: 'ms' });
  report.figure({ name: 'baseline: GET /v1/tickets first page (no q): p95', value: b.p95, unit: 'ms' });
  report.figure({ name: 'baseline: GET /v1/tickets first page (no q): p99', value: b.p99, unit: 'ms' });
  const versus = (name: string, xs: Sample[], target?: { ms: number; text: string }) => {
    const p = percentiles(xs.map((s) => s.ms));
    report.figure({ name: `${name}: p50`, value: p.p50, unit: 'ms', baseline: b.p50, ratioKind: 'baseline/value' });
    report.figure({ name: `${name}: p95`, value: p.p95, unit: 'ms', baseline: b.p95, ratioKind: 'baseline/value', target: target?.text ?? null, met: target ? p.p95 <= target.ms : null });
    report.figure({ name: `${name}: p99`, value: p.p99, unit: 'ms', baseline: b.p99, ratioKind: 'baseline/value' });
    const bad = xs.filter((s) => s.status !== 200);
    report.figure({ name: `${name}: non-200`, value: bad.length, unit: 'responses', ...(bad.length ? { target: 'none (a 422 is a search past SEARCH_TIMEOUT_MS)', met: false } : {}) });
  };

  await c.query(`SET statement_timeout = '60s'`);
  const owner = data.ownerUserId;
  for (const kind of ['words', 'phrases', 'status:open', 'invoice numbers']) {
    const xs = samples.filter((s) => s.kind === kind);
    if (xs.length === 0) continue;
    versus(`${kind} (${xs.length} queries)`, xs, TARGETS[kind]);
    for (const band of [...BANDS.map((x) => x.name), null]) {
      const inBand = xs.filter((s) => s.band === band);
      if (inBand.length === 0) continue;
      const label = band ? `${kind}, ${band} band` : kind;
      const p = percentiles(inBand.map((s) => s.ms));
      if (band) report.figure({ name: `${label} (${inBand.length} queries): p95`, value: p.p95, unit: 'ms', baseline: b.p95, ratioKind: 'baseline/value', target: TARGETS[kind]?.text ?? null, met: TARGETS[kind] ? p.p95 <= TARGETS[kind]!.ms : null });
      const step = Math.max(1, Math.floor(inBand.length / COUNTED));
      const counted: { ranked: number; executionMs: number }[] = [];
      let timedOut = 0;
      for (let i = 0; i < inBand.length && counted.length + timedOut < COUNTED; i += step) {
        const r = await explainCount(c, await engineSql(data.tenantId, owner, inBand[i]!.q!));
        if (r) counted.push(r);
        else timedOut += 1;
      }
      const ranked = spread(counted.map((r) => r.ranked));
      const exec = spread(counted.map((r) => Math.round(r.executionMs)));
      console.log(`  ${label.padEnd(28)} p95 ${ms(p.p95).padStart(7)}   tickets matched: ${ranked}   execution in PostgreSQL (ms): ${exec}${timedOut ? `   ${timedOut} past 60 s` : ''}`);
      report.figure({ name: `${label}: tickets matched and ranked per query`, value: ranked + (timedOut ? ` (${timedOut} more ran past 60 s)` : '') });
      report.figure({ name: `${label}: execution in PostgreSQL per query (EXPLAIN ANALYZE), ms`, value: exec });
    }
    const slowest = [...xs].sort((x, y) => y.ms - x.ms)[0]!;
    const stmt = await engineSql(data.tenantId, owner, slowest.q!);
    console.log(`\nslowest ${kind} query: ${slowest.q} (${slowest.band ?? 'no'} band), ${ms(slowest.ms)} through the API; EXPLAIN (ANALYZE, BUFFERS) of the engine's statement:`);
    try {
      const { rows } = await c.query(`EXPLAIN (ANALYZE, BUFFERS) ${stmt.sql}`, stmt.parameters);
      console.log(rows.map((r: Record<string, string>) => `  ${r['QUERY PLAN']}`).join('\n'));
    } catch (err) {
      console.log(`  (${(err as Error).message})`);
    }
    report.note(`Slowest ${kind} query: \`${slowest.q}\` (${slowest.band ?? 'no'} band), ${ms(slowest.ms)}; its plan is printed by the bench.`);
  }
  const customers = samples.filter((s) => s.kind.startsWith('customers:'));
  if (customers.length) {
    versus(`customer fragment search, email and phone (${customers.length} queries)`, customers, TARGETS['customers: email fragment']);
    for (const kind of ['customers: email fragment', 'customers: phone fragment']) {
      const xs = samples.filter((s) => s.kind === kind);
      const p = percentiles(xs.map((s) => s.ms));
      report.figure({ name: `${kind} (${xs.length} queries): p95`, value: p.p95, unit: 'ms', baseline: b.p95, ratioKind: 'baseline/value', target: TARGETS[kind]!.text, met: p.p95 <= TARGETS[kind]!.ms });
      report.figure({ name: `${kind}: customers on the first page (limit 20)`, value: spread(xs.map((s) => s.rows)) });
      const slowest = [...xs].sort((x, y) => y.ms - x.ms).slice(0, 3);
      report.figure({ name: `${kind}: the three slowest`, value: slowest.map((s) => `${s.q} ${ms(s.ms)}`).join(', ') });
    }
  }
}

// ─── intake with and without index maintenance ────────────────────────────────────────────────────────────────

/**
 * SMS intake on a fresh database, the events bench's paired method: ROUNDS pairs, alternately (with, without)
 * and (without, with) the search triggers, the same load in both cases of a pair (the same bodies, the same
 * pattern of senders, each case with senders of its own). A third of the messages come from a new sender (a new
 * ticket: the ticket insert trigger builds its document) and two thirds from one of the case's earlier senders
 * (a message appended to their open ticket: the event trigger appends to the document, rewriting its row and
 * its GIN entries). Bodies are 6–40 words of the vocabulary, Zipf-distributed as in the generated database.
 */
async function intakePairs() {
  const database = await freshDatabase('helpdesk_bench_search_intake');
  const env: Env = benchEnv(database.url, 'search_intake', {
    INGEST_RATE_POINTS: '10000000',
    PG_POOL_MAX: process.env.PG_POOL_MAX ?? '16',
    WORKER_CONCURRENCY: process.env.WORKER_CONCURRENCY ?? '8',
  });
  const config = loadConfig(env);
  const { handle, ws } = await smsWorkspace(config, 'SearchIntake');
  const pg = new Client({ connectionString: database.url });
  await pg.connect();
  const triggers = await searchTriggers(pg);
  if (triggers.length === 0) throw new Error('no search_* triggers in the database: migration 0038 is missing');
  console.log(`\nintake: ${ROUNDS} pairs of ${INTAKE_SECONDS} s, ${INTAKE_CONNECTIONS} connections; toggled: ${triggers.map((t) => `${t.table}.${t.name}`).join(', ')}`);
  const worker = await start('workers/index.ts', { ...env, LOG_LEVEL: 'info' }, /workers started/);
  const api = await start('src/server.ts', { ...env, PORT: String(INTAKE_PORT) }, null, INTAKE_PORT);
  const cpuNow = () => cpuSample({ api, worker });

  let caseNo = 0;
  const intake = async (label: string, loadSeed: number, duration: number) => {
    caseNo += 1;
    const random = prng(loadSeed);
    let senders = 0;
    let n = 0;
    const prefix = `+1555${String(caseNo).padStart(3, '0')}`;
    const body = () => {
      const words = 6 + Math.floor(random() * 35);
      const out: string[] = [];
      for (let i = 0; i < words; i++) out.push(vocabulary[zipf(random(), 1, VOCABULARY) - 1]!);
      return out.join(' ');
    };
    const before = cpuNow();
    const r = await autocannon({
      url: `http://127.0.0.1:${INTAKE_PORT}/v1/ingest/sms`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      connections: INTAKE_CONNECTIONS,
      duration,
      requests: [
        {
          setupRequest: (req) => {
            n += 1;
            const sender = n % 3 === 1 || senders === 0 ? ++senders : 1 + Math.floor(random() * senders);
            const payload = { MessageSid: `SM${randomBytes(16).toString('hex')}`, AccountSid: 'AC0', From: `${prefix}${String(sender).padStart(7, '0')}`, To: '+15550000000', Body: body(), NumMedia: '0' };
            return { ...req, body: JSON.stringify({ tenant_id: ws.tenant_id, payload }) };
          },
        },
      ],
    });
    const cpu = cpuPer(before, cpuNow(), r['2xx']);
    console.log(`${label.padEnd(34)} ${r.requests.average.toFixed(0).padStart(6)} msgs/s   p50 ${String(r.latency.p50).padStart(4)} ms   p99 ${String(r.latency.p99).padStart(4)} ms   non-2xx ${r.non2xx}`);
    console.log(`${''.padEnd(34)} CPU-ms per message: ${Object.entries(cpu).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`);
    return { rate: r.requests.average, p99: r.latency.p99, non2xx: r.non2xx + r.errors, cpu };
  };
  const withCase = async (label: string, loadSeed: number) => {
    await setSearchTriggers(pg, true);
    return intake(`${label} with index maintenance`, loadSeed, INTAKE_SECONDS);
  };
  const withoutCase = async (label: string, loadSeed: number) => {
    await setSearchTriggers(pg, false);
    try {
      return await intake(`${label} without`, loadSeed, INTAKE_SECONDS);
    } finally {
      await setSearchTriggers(pg, true);
    }
  };

  await intake('warm-up', SEED, 3);
  const pairs: { with: Awaited<ReturnType<typeof intake>>; without: Awaited<ReturnType<typeof intake>> }[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const loadSeed = SEED * 1000 + round;
    // The order alternates, so what drifts over the run (tables growing, the machine's other load) favours neither.
    if (round % 2 === 1) {
      const w = await withCase(`#${round}`, loadSeed);
      pairs.push({ with: w, without: await withoutCase(`#${round}`, loadSeed) });
    } else {
      const wo = await withoutCase(`#${round}`, loadSeed);
      pairs.push({ with: await withCase(`#${round}`, loadSeed), without: wo });
    }
    console.log(`  pair #${round}: ${(pairs.at(-1)!.with.rate / pairs.at(-1)!.without.rate).toFixed(2)}×`);
  }
  const counts = await pg.query<{ tickets: string; events: string; docs: string }>(
    `SELECT (SELECT count(*) FROM tickets) AS tickets, (SELECT count(*) FROM ticket_events) AS events, (SELECT count(*) FROM ticket_search) AS docs`,
  );
  await stop(api);
  await stop(worker);
  await pg.end();
  await handle.close();
  await database.drop();

  const byRatio = [...pairs].sort((x, y) => x.with.rate / x.without.rate - y.with.rate / y.without.rate);
  const median = byRatio[Math.floor(byRatio.length / 2)]!;
  const ratio = median.with.rate / median.without.rate;
  console.log(`intake with index maintenance: ${ratio.toFixed(2)}× without, median of ${ROUNDS} pairs (${pairs.map((p) => (p.with.rate / p.without.rate).toFixed(2)).join(', ')}; target ≥ 0.90)`);
  const cpuLine = (x: Record<string, number>) => `${Object.entries(x).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}; total ${Object.values(x).reduce((a, v) => a + v, 0).toFixed(2)}`;
  report.figure({ name: 'intake with index maintenance: throughput (median pair)', value: median.with.rate, unit: 'msgs/s', baseline: median.without.rate, target: '≥ 0.9× intake without it (issue 36)', met: ratio >= 0.9 });
  report.figure({ name: 'intake with index maintenance: every pair', value: pairs.map((p) => `${(p.with.rate / p.without.rate).toFixed(2)}×`).join(', ') });
  report.figure({ name: 'intake with index maintenance: p99 (median pair)', value: median.with.p99, unit: 'ms', baseline: median.without.p99 });
  report.figure({ name: 'intake CPU-ms per message with index maintenance (median pair)', value: cpuLine(median.with.cpu) });
  report.figure({ name: 'intake CPU-ms per message without (median pair)', value: cpuLine(median.without.cpu) });
  report.figure({ name: 'intake: PostgreSQL CPU-ms per message, with ÷ without (median of the pairs)', value: quantile(pairs.map((p) => p.with.cpu.postgres! / p.without.cpu.postgres!), 0.5), unit: '×' });
  report.figure({ name: 'intake: non-2xx over every case', value: pairs.reduce((n, p) => n + p.with.non2xx + p.without.non2xx, 0), unit: 'responses' });
  const c = counts.rows[0]!;
  report.note(
    `Intake: SMS to /v1/ingest/sms at ${INTAKE_CONNECTIONS} connections, ${INTAKE_SECONDS} s per case, a third of the messages from new senders (new tickets) and two thirds continuing a case's earlier conversations; bodies of 6–40 vocabulary words. The database ended with ${Number(c.tickets).toLocaleString('en-US')} tickets, ${Number(c.events).toLocaleString('en-US')} events and ${Number(c.docs).toLocaleString('en-US')} search documents (tickets opened while the triggers were off have none).`,
  );
}

// ─── index sizes ──────────────────────────────────────────────────────────────────────────────────────────────

async function sizes(c: Client) {
  const n = (
    await c.query<{ tickets: string; events: string; messages: string; customers: string; handles: string }>(
      `SELECT (SELECT count(*) FROM tickets) AS tickets, (SELECT count(*) FROM ticket_events) AS events,
              (SELECT count(*) FROM ticket_events WHERE body <> '') AS messages,
              (SELECT count(*) FROM customers) AS customers, (SELECT count(*) FROM customer_handles) AS handles`,
    )
  ).rows[0]!;
  const tickets = Number(n.tickets);
  const events = Number(n.events);
  const mb = (bytes: number) => bytes / 2 ** 20;
  const { rows } = await c.query<{ name: string; kind: string; table: string; bytes: string; def: string | null }>(
    `SELECT c.relname AS name, c.relkind AS kind, t.relname AS table,
            CASE WHEN c.relkind = 'r' THEN pg_table_size(c.oid) ELSE pg_relation_size(c.oid) END AS bytes, pg_get_indexdef(c.oid) AS def
     FROM pg_class c LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = coalesce(i.indrelid, c.oid)
     WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i')
       AND (t.relname = 'ticket_search' OR pg_get_indexdef(c.oid) ~ 'gin_trgm_ops' OR c.relname IN ('customer_handles_customer', 'ticket_events', 'tickets'))
     ORDER BY t.relname, c.relkind DESC, c.relname`,
  );
  const database = Number((await c.query<{ b: string }>(`SELECT pg_database_size(current_database()) AS b`)).rows[0]!.b);
  console.log(`\nsizes (${tickets.toLocaleString('en-US')} tickets, ${events.toLocaleString('en-US')} events of which ${Number(n.messages).toLocaleString('en-US')} carry text, ${Number(n.customers).toLocaleString('en-US')} customers, ${Number(n.handles).toLocaleString('en-US')} handles):`);
  for (const r of rows) {
    const bytes = Number(r.bytes);
    const what = r.kind === 'r' ? `table ${r.name} (heap and TOAST)` : `index ${r.name} on ${r.table}`;
    const perEvents = mb(bytes) / (events / 1e6);
    const perTickets = mb(bytes) / (tickets / 1e6);
    console.log(`  ${what.padEnd(60)} ${mb(bytes).toFixed(0).padStart(7)} MB   ${perEvents.toFixed(0).padStart(6)} MB per million events   ${perTickets.toFixed(0).padStart(6)} MB per million tickets`);
    report.figure({ name: `size: ${what}`, value: mb(bytes), unit: 'MB' });
    if (r.table === 'ticket_search') {
      report.figure({ name: `size: ${what} per million events`, value: perEvents, unit: 'MB' });
      report.figure({ name: `size: ${what} per million tickets`, value: perTickets, unit: 'MB' });
    }
  }
  const searchBytes = rows.filter((r) => r.table === 'ticket_search').reduce((s, r) => s + Number(r.bytes), 0);
  report.figure({ name: 'size: ticket_search with its indexes, per million events', value: mb(searchBytes) / (events / 1e6), unit: 'MB', target: 'reported (issue 36: the size of the indexes per million events)' });
  report.figure({ name: 'size: the whole generated database (pg_database_size)', value: mb(database), unit: 'MB' });
  console.log(`  ticket_search with its indexes: ${(mb(searchBytes) / (events / 1e6)).toFixed(0)} MB per million events; the database: ${(mb(database) / 1024).toFixed(1)} GB`);
}

async function main() {
  const data = await dataset();
  const total = data.steps.reduce((sum, x) => sum + x.seconds, 0);
  console.log(`generation: ${total.toFixed(0)} s${data.reused ? ` (when it was generated, ${data.generatedAt})` : ''}`);
  for (const x of data.steps) report.figure({ name: `generation: ${x.step}${data.reused ? ' (when generated)' : ''}`, value: x.seconds, unit: 's' });
  report.figure({ name: `generation: total${data.reused ? ` (reused, generated ${data.generatedAt})` : ''}`, value: total, unit: 's' });
  report.settings({ 'database reused': data.reused });

  if (PARTS.has('queries') || PARTS.has('sizes')) {
    // A key of this run's own, minted as the owner (a kept database's earlier keys are not known here).
    const env = benchEnv(data.url, 'search');
    const config = loadConfig(env);
    const handle = createDb(config);
    const audit = createAuditService({ db: handle.db });
    const actor: Principal = { kind: 'user', tenantId: data.tenantId, userId: data.ownerUserId, role: 'owner', apiKeyId: null, scopes: null, agentIds: [] };
    const key = await handle.db.transaction().execute((tx) => createApiKeyService({ db: handle.db, config, audit }).mint(tx, actor, { name: `search bench ${new Date().toISOString()}`, scopes: ['*'] }));
    await handle.close();
    if (PARTS.has('queries')) {
      const { c, samples } = await queryLatency(data, { key: key.secret });
      await latencyFigures(c, data, samples);
      await c.end();
    }
    if (PARTS.has('sizes')) {
      const c = new Client({ connectionString: data.url });
      await c.connect();
      await sizes(c);
      await c.end();
    }
  }
  if (PARTS.has('intake')) await intakePairs();
  if (!KEEP) await dropBenchDatabase(new URL(data.url));
}

runBench(main);
