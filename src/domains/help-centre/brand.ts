/**
 * The help centre's branding object: a closed set of eighteen keys naming five concepts. Pure: the
 * validation is the whole contract, so it lives apart from storage and is tested key by key.
 */
export const BRAND_CONCEPTS = {
  logo_url: { kind: 'asset', spellings: ['logo_url', 'logoUrl', 'logo'] },
  favicon_url: { kind: 'asset', spellings: ['favicon_url', 'faviconUrl', 'favicon'] },
  brand_color: { kind: 'colour', spellings: ['brand_color', 'brandColor', 'brand_colour', 'color', 'colour', 'primary_color'] },
  title: { kind: 'text', spellings: ['title', 'site_title', 'siteTitle'] },
  tagline: { kind: 'text', spellings: ['tagline', 'tag_line', 'tagLine'] },
} as const;

export type BrandConcept = keyof typeof BRAND_CONCEPTS;
type Kind = (typeof BRAND_CONCEPTS)[BrandConcept]['kind'];

const CONCEPT_OF = new Map<string, BrandConcept>(
  (Object.entries(BRAND_CONCEPTS) as [BrandConcept, { spellings: readonly string[] }][]).flatMap(([c, d]) => d.spellings.map((s) => [s, c] as const)),
);
export const BRAND_KEYS = [...CONCEPT_OF.keys()];

export const RULES: Record<Kind, string> = {
  asset: 'an absolute https:// URL with a host, or a site-relative path beginning with a single "/"',
  colour: 'a hex colour: #rgb or #rrggbb',
  text: 'a string of 1 to 120 characters after trimming, without control characters, "<" or ">"',
};

// eslint-disable-next-line no-control-regex -- control characters are exactly what the text rule refuses
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function valid(kind: Kind, value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  if (kind === 'colour') return /^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/.test(value) ? value : undefined;
  if (kind === 'text') {
    const t = value.trim();
    return t.length >= 1 && t.length <= 120 && !CONTROL.test(t) && !/[<>]/.test(t) ? t : undefined;
  }
  if (/\s/.test(value) || CONTROL.test(value)) return undefined;
  if (value.startsWith('/')) return value.startsWith('//') || value.startsWith('/\\') ? undefined : value;
  try {
    const u = new URL(value);
    return u.protocol === 'https:' && u.hostname !== '' && value.toLowerCase().startsWith('https://') ? value : undefined;
  } catch {
    return undefined;
  }
}

export type BrandCheck =
  | { ok: true; brand: Partial<Record<BrandConcept, string>> }
  | { ok: false; code: 'brand_key_unknown' | 'brand_value_invalid' | 'brand_key_duplicate'; key: string; detail: string };

/** Validates a whole branding object (replace semantics) and returns it under canonical names. */
export function checkBrand(input: Record<string, unknown>): BrandCheck {
  const brand: Partial<Record<BrandConcept, string>> = {};
  const seen = new Map<BrandConcept, string>();
  for (const [key, value] of Object.entries(input)) {
    const concept = CONCEPT_OF.get(key);
    if (!concept) return { ok: false, code: 'brand_key_unknown', key, detail: `"${key}" is not a branding key; the keys are ${BRAND_KEYS.join(', ')}.` };
    const other = seen.get(concept);
    if (other !== undefined) {
      return { ok: false, code: 'brand_key_duplicate', key, detail: `"${other}" and "${key}" both set the ${concept}; send one of them.` };
    }
    seen.set(concept, key);
    const kind = BRAND_CONCEPTS[concept].kind;
    const clean = valid(kind, value);
    if (clean === undefined) return { ok: false, code: 'brand_value_invalid', key, detail: `"${key}" must be ${RULES[kind]}.` };
    brand[concept] = clean;
  }
  return { ok: true, brand };
}
