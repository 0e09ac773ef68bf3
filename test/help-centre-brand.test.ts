/**
 * The help centre branding object (spec: Help centre branding object; issue 9 Part 2 item 6), checked key by
 * key through the pure validator: every one of the eighteen spellings under every rule of its kind.
 */
import { BRAND_CONCEPTS, BRAND_KEYS, checkBrand, RULES, type BrandConcept } from '../src/domains/help-centre/brand';

/** The closed set as the issue lists it, canonical name first (not derived from the code under test). */
const EXPECTED: Record<BrandConcept, { kind: 'asset' | 'colour' | 'text'; spellings: string[] }> = {
  logo_url: { kind: 'asset', spellings: ['logo_url', 'logoUrl', 'logo'] },
  favicon_url: { kind: 'asset', spellings: ['favicon_url', 'faviconUrl', 'favicon'] },
  brand_color: { kind: 'colour', spellings: ['brand_color', 'brandColor', 'brand_colour', 'color', 'colour', 'primary_color'] },
  title: { kind: 'text', spellings: ['title', 'site_title', 'siteTitle'] },
  tagline: { kind: 'text', spellings: ['tagline', 'tag_line', 'tagLine'] },
};

const VALID: Record<'asset' | 'colour' | 'text', [unknown, string][]> = {
  asset: [
    ['https://cdn.acme.test/logo.png', 'https://cdn.acme.test/logo.png'],
    ['https://acme.test', 'https://acme.test'],
    ['/assets/logo.svg', '/assets/logo.svg'],
  ],
  colour: [
    ['#abc', '#abc'],
    ['#A1B2C3', '#A1B2C3'],
  ],
  text: [
    ['Acme Help', 'Acme Help'],
    ['  trimmed  ', 'trimmed'],
    ['x'.repeat(120), 'x'.repeat(120)],
  ],
};

const INVALID: Record<'asset' | 'colour' | 'text', unknown[]> = {
  asset: ['http://x.test/a.png', '//host/a.png', 'javascript:alert(1)', 'JAVASCRIPT:alert(1)', 'data:image/png;base64,xx', 'https://', ' /a.png', '/a b.png', 'logo.png', '', 123, null],
  colour: ['abc', '#abcd', '#ggg', '#12345', 'red', 'rgb(0,0,0)', '', 0],
  text: ['', '   ', 'y'.repeat(121), 'a<b', 'a>b', 'tab\tin', 'nul\u0000', 42],
};

/** A fragment of each rule's wording that the refusal must carry, independent of RULES. */
const RULE_FRAGMENT = { asset: 'https://', colour: '#rrggbb', text: '120' } as const;

const cases = (Object.entries(BRAND_CONCEPTS) as [BrandConcept, (typeof BRAND_CONCEPTS)[BrandConcept]][]).flatMap(([concept, d]) =>
  d.spellings.map((key) => ({ concept, key, kind: d.kind as 'asset' | 'colour' | 'text' })),
);

describe('the closed set', () => {
  test('eighteen keys in five concepts, exactly as the issue lists them, canonical name first', () => {
    const actual = Object.fromEntries(Object.entries(BRAND_CONCEPTS).map(([c, d]) => [c, { kind: d.kind, spellings: [...d.spellings] }]));
    expect(actual).toEqual(EXPECTED);
    expect(cases).toHaveLength(18);
    expect([...BRAND_KEYS].sort()).toEqual(Object.values(EXPECTED).flatMap((d) => d.spellings).sort());
    for (const [concept, d] of Object.entries(EXPECTED)) expect(d.spellings[0]).toBe(concept);
  });
});

describe.each(cases)('$key ($kind, stored as $concept)', ({ concept, key, kind }) => {
  test.each(VALID[kind])(`accepts %j and stores it under ${concept}`, (value, stored) => {
    const r = checkBrand({ [key]: value });
    expect(r).toEqual({ ok: true, brand: { [concept]: stored } });
  });

  test.each(INVALID[kind].map((v) => [v]))('refuses %j with brand_value_invalid naming the key and its rule', (value) => {
    const r = checkBrand({ [key]: value });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.code).toBe('brand_value_invalid');
    expect(r.key).toBe(key);
    expect(r.detail).toContain(`"${key}"`);
    expect(r.detail).toContain(RULES[kind]);
    expect(r.detail).toContain(RULE_FRAGMENT[kind]);
  });

  test('an invalid value refuses the whole object even when other keys are valid', () => {
    const other = kind === 'text' ? { logo_url: '/l.png' } : { title: 'Acme' };
    const r = checkBrand({ ...other, [key]: INVALID[kind][0] });
    expect(r).toMatchObject({ ok: false, code: 'brand_value_invalid', key });
  });
});

describe('unknown and duplicate keys', () => {
  test.each(['logoURL', 'brand', 'Title', 'LOGO_URL', 'logo-url', 'background_color', ''])('unknown key %j → brand_key_unknown naming it', (key) => {
    const r = checkBrand({ [key]: '#abc' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.code).toBe('brand_key_unknown');
    expect(r.key).toBe(key);
    expect(r.detail).toContain(`"${key}"`);
  });

  test('an unknown key among valid keys is still refused, not dropped', () => {
    expect(checkBrand({ title: 'Acme', logo_url: '/l.png', logoURL: '/l.png' })).toMatchObject({ ok: false, code: 'brand_key_unknown', key: 'logoURL' });
  });

  test.each([
    ['logo', 'logo_url'],
    ['color', 'brand_colour'],
    ['title', 'siteTitle'],
    ['tagline', 'tagLine'],
    ['favicon', 'faviconUrl'],
  ])('%s + %s → brand_key_duplicate', (a, b) => {
    const value = (k: string) => (['logo', 'favicon', 'faviconUrl', 'logo_url'].includes(k) ? '/a.png' : ['color', 'brand_colour'].includes(k) ? '#abc' : 'Acme');
    const r = checkBrand({ [a]: value(a), [b]: value(b) });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.code).toBe('brand_key_duplicate');
    expect(r.detail).toContain(`"${a}"`);
    expect(r.detail).toContain(`"${b}"`);
  });

  test('every pair of spellings of one concept is a duplicate', () => {
    for (const d of Object.values(EXPECTED)) {
      const v = VALID[d.kind][0]![0];
      for (const a of d.spellings)
        for (const b of d.spellings) if (a !== b) expect(checkBrand({ [a]: v, [b]: v })).toMatchObject({ ok: false, code: 'brand_key_duplicate' });
    }
  });

  test('an empty object is ok and stores nothing', () => {
    expect(checkBrand({})).toEqual({ ok: true, brand: {} });
  });

  test('all five concepts at once, under aliases, come back under canonical names only', () => {
    expect(checkBrand({ logo: '/l.png', faviconUrl: 'https://acme.test/f.ico', colour: '#0f1522', siteTitle: ' Acme ', tag_line: 'We help' })).toEqual({
      ok: true,
      brand: { logo_url: '/l.png', favicon_url: 'https://acme.test/f.ico', brand_color: '#0f1522', title: 'Acme', tagline: 'We help' },
    });
  });
});
