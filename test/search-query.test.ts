/**
 * The query language of `q` (issue 36), parsed without a database: src/domains/search/query.ts. What each
 * operator yields, quotes, exclusions, unicode, the limits, and the refusals, each naming its problem.
 */
import { DomainError } from '../src/lib/errors';
import { hasText, isPrefixable, parseTicketQuery, requireSomethingToFind, type SearchLimits, type TicketQuery } from '../src/domains/search/query';

const LIMITS: SearchLimits = { maxChars: 512, maxTerms: 32 };
const parse = (text: string, limits = LIMITS) => parseTicketQuery(text, limits);

/** The refusal a parse throws: its code, detail and the message on `q`. */
function refusal(run: () => unknown): { code: string; detail: string; message: string; path: string } {
  try {
    run();
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    return { code: err.code, detail: err.detail, message: err.extra.errors?.[0]?.message ?? '', path: err.extra.errors?.[0]?.path ?? '' };
  }
  throw new Error('expected a refusal');
}

const empty: TicketQuery = {
  words: [],
  phrases: [],
  excludedWords: [],
  excludedPhrases: [],
  from: [],
  tags: [],
  statuses: [],
  assignees: [],
  channels: [],
  before: null,
  after: null,
};

describe('words and phrases', () => {
  test('bare words must all match, and only the last is a prefix', () => {
    expect(parse('invoice refu')).toEqual({ ...empty, words: [{ text: 'invoice', prefix: false }, { text: 'refu', prefix: true }] });
  });

  test('the last bare word is a prefix even when operators follow it', () => {
    expect(parse('refu status:open').words).toEqual([{ text: 'refu', prefix: true }]);
  });

  test('a last word with punctuation in it is matched whole, never as a prefix (nothing of it reaches tsquery syntax)', () => {
    expect(parse('invoice INV-4471').words).toEqual([
      { text: 'invoice', prefix: false },
      { text: 'INV-4471', prefix: false },
    ]);
    expect(parse("can't").words).toEqual([{ text: "can't", prefix: false }]);
    expect(parse('refund:*').words).toEqual([{ text: 'refund:*', prefix: false }]);
  });

  test('a quoted phrase keeps its words and order; several phrases and words mix', () => {
    expect(parse('"charged twice" refund "second payment"')).toEqual({
      ...empty,
      words: [{ text: 'refund', prefix: true }],
      phrases: ['charged twice', 'second payment'],
    });
  });

  test('a quote ends a bare word and starts a phrase', () => {
    expect(parse('card"charged twice"')).toMatchObject({ words: [{ text: 'card' }], phrases: ['charged twice'] });
  });

  test('-word and -"phrase" exclude; a dash inside a word or alone is not an exclusion', () => {
    expect(parse('refund -paypal -"bank transfer" e-mail -')).toEqual({
      ...empty,
      words: [
        { text: 'refund', prefix: false },
        { text: 'e-mail', prefix: false },
      ],
      excludedWords: ['paypal'],
      excludedPhrases: ['bank transfer'],
    });
  });

  test('punctuation alone is no term (an empty phrase, a lone symbol)', () => {
    expect(parse('refund "" & — "!!"')).toEqual({ ...empty, words: [{ text: 'refund', prefix: true }] });
  });

  test('anything shaped like word: that is not an operator is a plain word', () => {
    expect(parse('re: invoice').words).toEqual([
      { text: 're:', prefix: false },
      { text: 'invoice', prefix: true },
    ]);
    expect(parse('https://example.test/x').words).toEqual([{ text: 'https://example.test/x', prefix: false }]);
  });

  test('unicode: accents, other scripts and emoji are kept as written (NFC); decomposed accents are composed', () => {
    expect(parse('Déjà vu').words).toEqual([
      { text: 'Déjà', prefix: false },
      { text: 'vu', prefix: true },
    ]);
    expect(parse('De\u0301ja\u0300').words).toEqual([{ text: 'Déjà', prefix: true }]);
    expect(parse('Straße 東京').words).toEqual([
      { text: 'Straße', prefix: false },
      { text: '東京', prefix: true },
    ]);
    // An emoji is no word on its own; inside a word it keeps the word from being a prefix.
    expect(parse('🙂 refund🙂').words).toEqual([{ text: 'refund🙂', prefix: false }]);
    expect(isPrefixable('Ærøskøbing42')).toBe(true);
    expect(isPrefixable('a b')).toBe(false);
  });

  test('whitespace of every kind separates terms', () => {
    expect(parse('refund\tinvoice\nnow\u00a0please').words.map((w) => w.text)).toEqual(['refund', 'invoice', 'now', 'please']);
  });
});

describe('operators', () => {
  test('status: repeated or comma-separated means any of; names and values are case-insensitive', () => {
    expect(parse('STATUS:Open status:pending,on_hold').statuses).toEqual(['open', 'pending', 'on_hold']);
  });

  test('channel: any of the ticket sources', () => {
    expect(parse('channel:email Channel:SMS,whatsapp').channels).toEqual(['email', 'sms', 'whatsapp']);
  });

  test('tag: each must be on the ticket; quoted for a tag with spaces; the value keeps its case', () => {
    expect(parse('tag:billing tag:"Key Account"').tags).toEqual(['billing', 'Key Account']);
  });

  test('assignee: me, none or a user id (any of)', () => {
    const id = '0190A3B4-0000-7000-8000-00000000000A';
    expect(parse(`assignee:me assignee:NONE assignee:${id}`).assignees).toEqual([{ kind: 'me' }, { kind: 'none' }, { kind: 'user', id: id.toLowerCase() }]);
  });

  test('from: an email or name fragment, lower-cased; a phone fragment carries its digits', () => {
    expect(parse('from:Maya.F from:415-555 from:"+1 (415) 555"').from).toEqual([
      { text: 'maya.f', digits: null },
      { text: '415-555', digits: '415555' },
      { text: '+1 (415) 555', digits: '1415555' },
    ]);
    // Letters make it a text fragment, digits or not.
    expect(parse('from:inv4471').from).toEqual([{ text: 'inv4471', digits: null }]);
  });

  test('before: and after: take a date (that UTC day starts) or an ISO datetime with its offset', () => {
    expect(parse('before:2026-03-01 after:2026-02-01T09:30:00+02:00')).toMatchObject({
      before: new Date('2026-03-01T00:00:00.000Z'),
      after: new Date('2026-02-01T07:30:00.000Z'),
    });
    expect(parse('after:2026-02-01T09:30Z').after).toEqual(new Date('2026-02-01T09:30:00.000Z'));
    expect(parse('after:2026-02-01t09:30:15.123456z').after).toEqual(new Date('2026-02-01T09:30:15.123Z'));
  });

  test('repeated before: keeps the earliest, repeated after: the latest (each bound narrows)', () => {
    expect(parse('before:2026-03-01 before:2026-02-01 after:2025-01-01 after:2025-06-01')).toMatchObject({
      before: new Date('2026-02-01T00:00:00.000Z'),
      after: new Date('2025-06-01T00:00:00.000Z'),
    });
  });

  test('everything at once', () => {
    const q = parse('refund "charged twice" -paypal from:maya tag:billing status:open assignee:me channel:email after:2026-01-01 before:2026-04-01');
    expect(q).toMatchObject({
      words: [{ text: 'refund', prefix: true }],
      phrases: ['charged twice'],
      excludedWords: ['paypal'],
      from: [{ text: 'maya', digits: null }],
      tags: ['billing'],
      statuses: ['open'],
      assignees: [{ kind: 'me' }],
      channels: ['email'],
    });
    expect(hasText(q)).toBe(true);
    expect(hasText(parse('status:open'))).toBe(false);
  });
});

describe('refusals: 400 query_invalid naming the problem on q', () => {
  test.each([
    ['refund "charged twice', 'unclosed quote (opened at character 8)'],
    ['tag:"billing', 'unclosed quote (opened at character 5)'],
    ['tag:', 'the operator tag: has no value'],
    ['refund status: open', 'the operator status: has no value'],
    ['status:closedd', 'unknown status "closedd"'],
    ['status:open,', 'unknown status ""'],
    ['status:merged', 'status:merged never matches'],
    ['channel:pigeon', 'unknown channel "pigeon"'],
    ['assignee:someone', 'assignee:someone is not me, none or a user id'],
    ['assignee:0190a3b4-0000-7000-8000-00000000000', 'is not me, none or a user id'],
    ['from:ab', 'from:ab is shorter than 3 characters'],
    ['from:4-1', 'from:4-1 has fewer than 3 digits'],
    ['before:2026-02-30', 'before:2026-02-30 is not a date'],
    ['after:yesterday', 'after:yesterday is not a date'],
    ['after:2026-02-01T25:00Z', 'is not a date'],
    ['after:2026-02-01T10:00', 'is not a date'],
    ['after:2026-02-01T10:00:00+0200', 'is not a date'],
    ['-tag:billing refund', 'the operator tag: cannot be excluded'],
    [`tag:${'x'.repeat(65)}`, 'longer than 64 characters'],
    ['& — !!', 'nothing to search for'],
  ])('%p', (text, message) => {
    const r = refusal(() => parse(text));
    expect(r.code).toBe('query_invalid');
    expect(r.path).toBe('q');
    expect(r.message).toContain(message);
    expect(r.detail).toContain(message);
  });

  test('a long value is quoted in the message by its start only', () => {
    const r = refusal(() => parse(`assignee:${'y'.repeat(300)}`));
    expect(r.message.length).toBeLessThan(120);
  });

  test('exclusions alone are refused unless another filter narrows them', () => {
    const onlyOut = parse('-spam -"out of office"');
    expect(refusal(() => requireSomethingToFind(onlyOut, false)).message).toContain('only exclusions');
    expect(() => requireSomethingToFind(onlyOut, true)).not.toThrow();
    expect(() => requireSomethingToFind(parse('-spam status:open'), false)).not.toThrow();
    expect(() => requireSomethingToFind(parse('-spam before:2026-01-01'), false)).not.toThrow();
  });

  test('the error path can be a stored filter’s', () => {
    expect(refusal(() => parseTicketQuery('"open', LIMITS, 'body.filters.q')).path).toBe('body.filters.q');
  });
});

describe('limits', () => {
  test('past the most characters: 400 query_too_long, counted in characters, not UTF-16 units', () => {
    expect(refusal(() => parse('a'.repeat(513)))).toMatchObject({
      code: 'query_too_long',
      detail: 'The search query has 513 characters; at most 512 (SEARCH_QUERY_MAX_CHARS) are accepted.',
      message: 'at most 512 characters',
    });
    expect(parse('a'.repeat(512)).words).toHaveLength(1);
    // 512 characters outside the Basic Multilingual Plane are 1,024 UTF-16 units: still 512 characters, accepted.
    expect(() => parse(`x${'𝒜'.repeat(511)}`)).not.toThrow();
    expect(refusal(() => parse('𝒜'.repeat(513))).code).toBe('query_too_long');
  });

  test('past the most terms: 400 query_too_complex (words, phrases, exclusions and operators all count)', () => {
    expect(parse(Array.from({ length: 32 }, (_, i) => `w${i}`).join(' ')).words).toHaveLength(32);
    const r = refusal(() => parse(Array.from({ length: 33 }, (_, i) => `w${i}`).join(' ')));
    expect(r).toMatchObject({ code: 'query_too_complex', path: 'q' });
    expect(refusal(() => parse('a "b c" -d tag:e', { maxChars: 512, maxTerms: 3 })).code).toBe('query_too_complex');
  });

  test('a 100 KB hostile query is refused at once, whatever it holds', () => {
    const hostile = [
      '"'.repeat(100_000),
      `${'a:'.repeat(50_000)}`,
      `${'-"'.repeat(50_000)}`,
      `from:${'%_\\'.repeat(33_000)}`,
      `${'(a|a)*'.repeat(17_000)}`,
    ];
    for (const text of hostile) {
      const started = process.hrtime.bigint();
      expect(refusal(() => parse(text)).code).toBe('query_too_long');
      expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(20);
    }
  });

  test('a hostile query within the limits is parsed in linear time (the largest limits a deployment allows)', () => {
    const big: SearchLimits = { maxChars: 4096, maxTerms: 256 };
    const inputs = ['"'.repeat(4095), `${'-'.repeat(4000)}x`, 'a:'.repeat(2048), `tag:${'"'.repeat(4000)}`, `${'x'.repeat(4090)} y`];
    for (const text of inputs) {
      const started = process.hrtime.bigint();
      try {
        parse(text, big);
      } catch (err) {
        expect(err).toBeInstanceOf(DomainError);
      }
      expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(50);
    }
  });

  test('10,000 terms are refused (too long under the default limits, too complex under the largest)', () => {
    const terms = Array.from({ length: 10_000 }, (_, i) => `t${i}`).join(' ');
    expect(refusal(() => parse(terms)).code).toBe('query_too_long');
    const short = Array.from({ length: 10_000 }, () => 'a').join(' ').slice(0, 4096);
    expect(refusal(() => parse(short, { maxChars: 4096, maxTerms: 256 })).code).toBe('query_too_complex');
  });
});
