import { Parser } from 'htmlparser2';
import sanitizeHtml from 'sanitize-html';

/**
 * The one HTML pipeline of the help centre: every article body a visitor is served (imported from the
 * source, or rendered from a local markdown edit) passes through it. sanitize-html does the work with an
 * explicit allowlist; this module adds what an author needs to see about it (what was removed, which links
 * and assets were rewritten). Bump the version when the allowlist changes: stored renders carry it.
 */
export const SANITIZER_VERSION = 'hc-sanitizer-2026.11.1';

const ALLOWED_TAGS = [
  'p', 'br', 'hr', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'blockquote', 'pre', 'code', 'span', 'div',
  'strong', 'b', 'em', 'i', 'u', 's', 'sub', 'sup', 'small', 'mark', 'kbd', 'abbr',
  'ul', 'ol', 'li', 'dl', 'dt', 'dd', 'a', 'img', 'figure', 'figcaption',
  'table', 'thead', 'tbody', 'tfoot', 'tr', 'th', 'td', 'caption', 'colgroup', 'col', 'details', 'summary', 'iframe',
];
const ALLOWED_ATTRIBUTES: Record<string, string[]> = {
  a: ['href', 'title', 'name', 'id', 'rel', 'target'],
  img: ['src', 'alt', 'title', 'width', 'height'],
  iframe: ['src', 'width', 'height', 'title', 'allowfullscreen', 'frameborder'],
  th: ['colspan', 'rowspan', 'scope'],
  td: ['colspan', 'rowspan'],
  ol: ['start', 'type'],
  abbr: ['title'],
  code: ['class'],
  pre: ['class'],
  '*': ['id', 'lang', 'dir'],
};
// Embedded video only, from hosts that serve a player page: anything else framed could be a phishing page.
export const IFRAME_HOSTS = ['www.youtube.com', 'www.youtube-nocookie.com', 'player.vimeo.com', 'www.loom.com', 'fast.wistia.net'];
const URL_SCHEMES = ['https', 'http', 'mailto', 'tel'];

export interface SanitizeContext {
  /** Hosts we know serve https (the source helpdesk, this centre): an http: link to them is upgraded. */
  knownHosts: string[];
  /** A link to an article at the source → this centre's URL for it; undefined leaves the link as it is. */
  rewriteArticleLink?: (href: string) => string | undefined;
}

export interface SanitizeResult {
  html: string;
  sanitizer_version: string;
  sanitize_report: { removed_tags: Record<string, number>; removed_attributes: Record<string, number>; total_removed: number };
  link_report: { rewritten: { from: string; to: string; reason: 'source_article' | 'https_upgrade' }[]; external: string[] };
  asset_report: { assets: { src: string; kind: 'image' | 'file' | 'embed'; outcome: 'kept' | 'rewritten' | 'dropped'; to?: string }[] };
}

const FILE_LINK = /\.(?:pdf|docx?|xlsx?|pptx?|zip|csv|txt|rtf|odt|ods)(?:[?#]|$)/i;
const allowedAttr = (tag: string, attr: string) => (ALLOWED_ATTRIBUTES[tag] ?? []).includes(attr) || (ALLOWED_ATTRIBUTES['*'] ?? []).includes(attr);

function hostOf(url: string): string | undefined {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

/**
 * A URL value is safe when it is relative or uses one of `schemes` (entity and whitespace tricks decoded
 * first). The same scheme lists as the sanitize-html options, so the reports agree with the output.
 */
function safeUrl(value: string, schemes: string[] = URL_SCHEMES): boolean {
  // Browsers ignore control characters and whitespace inside a scheme ("java\tscript:"): so must we.
  // eslint-disable-next-line no-control-regex -- stripping them is the point
  const v = value.replace(/[\u0000-\u0020\u007f-\u009f]/g, '').toLowerCase();
  const scheme = /^([a-z][a-z0-9+.-]*):/.exec(v)?.[1];
  return scheme === undefined || schemes.includes(scheme);
}
const IMAGE_SCHEMES = ['https', 'http'];
const embeddable = (src: string) => /^https:\/\//i.test(src.trim()) && IFRAME_HOSTS.includes(hostOf(src) ?? '');

/** Counts what the allowlist will remove, by tag and by attribute (including URLs with a refused scheme). */
function removals(html: string) {
  const removed_tags: Record<string, number> = {};
  const removed_attributes: Record<string, number> = {};
  const bump = (m: Record<string, number>, k: string) => (m[k] = (m[k] ?? 0) + 1);
  const parser = new Parser(
    {
      onopentag(name, attrs) {
        const tag = name.toLowerCase();
        if (!ALLOWED_TAGS.includes(tag)) {
          bump(removed_tags, tag);
          return;
        }
        if (tag === 'iframe' && !embeddable(attrs.src ?? '')) {
          bump(removed_tags, 'iframe');
          return;
        }
        for (const [attr, value] of Object.entries(attrs)) {
          const a = attr.toLowerCase();
          if (!allowedAttr(tag, a) || (['href', 'src'].includes(a) && !safeUrl(value, tag === 'img' ? IMAGE_SCHEMES : URL_SCHEMES))) {
            bump(removed_attributes, a);
          }
        }
      },
      oncomment() {
        bump(removed_tags, '#comment');
      },
    },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  const total_removed = [...Object.values(removed_tags), ...Object.values(removed_attributes)].reduce((a, b) => a + b, 0);
  return { removed_tags, removed_attributes, total_removed };
}

export function sanitize(input: string, ctx: SanitizeContext): SanitizeResult {
  const known = new Set(ctx.knownHosts.map((h) => h.toLowerCase()));
  const link_report: SanitizeResult['link_report'] = { rewritten: [], external: [] };
  const asset_report: SanitizeResult['asset_report'] = { assets: [] };
  const upgrade = (url: string) => (/^http:\/\//i.test(url) && known.has(hostOf(url) ?? '') ? `https://${url.slice('http://'.length)}` : undefined);

  const html = sanitizeHtml(input, {
    allowedTags: ALLOWED_TAGS,
    allowedAttributes: ALLOWED_ATTRIBUTES,
    allowedSchemes: URL_SCHEMES,
    allowedSchemesByTag: { img: ['https', 'http'], iframe: ['https'] },
    allowProtocolRelative: false,
    allowedIframeHostnames: IFRAME_HOSTS,
    disallowedTagsMode: 'discard',
    // Text inside these is code or markup, never content a visitor should see.
    nonTextTags: ['script', 'style', 'textarea', 'option', 'noscript', 'title', 'template', 'xmp', 'noembed', 'noframes'],
    transformTags: {
      a: (tagName, attribs) => {
        const href = attribs.href;
        if (!href) return { tagName, attribs };
        const article = ctx.rewriteArticleLink?.(href);
        if (article) {
          link_report.rewritten.push({ from: href, to: article, reason: 'source_article' });
          return { tagName, attribs: { ...attribs, href: article } };
        }
        const up = upgrade(href);
        if (up) {
          link_report.rewritten.push({ from: href, to: up, reason: 'https_upgrade' });
          return { tagName, attribs: { ...attribs, href: up } };
        }
        if (/^https?:\/\//i.test(href) && !known.has(hostOf(href) ?? '')) {
          link_report.external.push(href);
          // External links open safely: no window.opener for the target page.
          if (FILE_LINK.test(href)) asset_report.assets.push({ src: href, kind: 'file', outcome: 'kept' });
          return { tagName, attribs: { ...attribs, rel: 'noopener noreferrer nofollow' } };
        }
        if (FILE_LINK.test(href)) asset_report.assets.push({ src: href, kind: 'file', outcome: 'kept' });
        return { tagName, attribs };
      },
      img: (tagName, attribs) => {
        const src = attribs.src ?? '';
        if (!src || !safeUrl(src, IMAGE_SCHEMES)) {
          asset_report.assets.push({ src: src.slice(0, 200), kind: 'image', outcome: 'dropped' });
          const { src: _dropped, ...rest } = attribs;
          void _dropped;
          return { tagName, attribs: rest };
        }
        const up = upgrade(src);
        asset_report.assets.push(up ? { src, kind: 'image', outcome: 'rewritten', to: up } : { src, kind: 'image', outcome: 'kept' });
        return { tagName, attribs: up ? { ...attribs, src: up } : attribs };
      },
      iframe: (tagName, attribs) => {
        const src = attribs.src ?? '';
        if (!embeddable(src)) {
          asset_report.assets.push({ src: src.slice(0, 200), kind: 'embed', outcome: 'dropped' });
          const { src: _dropped, ...rest } = attribs;
          void _dropped;
          return { tagName, attribs: rest };
        }
        asset_report.assets.push({ src, kind: 'embed', outcome: 'kept' });
        return { tagName, attribs };
      },
    },
    // An <img> or <iframe> whose source was dropped shows nothing; leave no empty element behind.
    exclusiveFilter: (frame) => (frame.tag === 'img' || frame.tag === 'iframe') && !frame.attribs.src,
  });
  return { html, sanitizer_version: SANITIZER_VERSION, sanitize_report: removals(input), link_report, asset_report };
}
