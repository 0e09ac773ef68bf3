import { Parser } from 'htmlparser2';
import MarkdownIt from 'markdown-it';
import TurndownService from 'turndown';
import type { MessagePort } from 'node:worker_threads';
import type { FieldError } from '../../lib/errors';
import { sanitize, type SanitizeResult } from './sanitize';

/**
 * The heavy half of the article pipeline: markdown → HTML, the sanitiser and its removals report, HTML →
 * markdown and the excerpt. It reads nothing and writes nothing, so it runs in a worker thread of the render
 * pool (render-pool.ts) with a time budget, never on the event loop that answers requests. Everything it
 * needs from the database arrives in the task as plain data.
 */

/**
 * Explicit bounds on what an article may be. Generous for real help articles (a long Zendesk or Intercom
 * article is tens of KiB of HTML; 200 KiB is rare), and tight enough that the pipeline's cost is bounded:
 * sanitize-html and htmlparser2's Parser spend O(depth) per tag, turndown recurses once per level.
 */
export const ARTICLE_LIMITS = {
  /** UTF-8 bytes of an incoming body_html. */
  bodyHtmlBytes: 256 * 1024,
  /** UTF-8 bytes of an edited body_markdown (markdown is terser than the HTML it renders to). */
  bodyMarkdownBytes: 128 * 1024,
  /** Open elements at once, void elements and implied end tags honoured (as the sanitiser's parser counts). */
  htmlDepth: 100,
  /** Elements in one body. */
  htmlElements: 20_000,
  /** Attributes on one element. */
  attributesPerElement: 64,
  /** Markdown block and inline nesting (quotes, lists, emphasis): deeper levels are read as plain text. */
  markdownNesting: 20,
} as const;

export interface ArticleLinkTarget {
  article_id: string;
  slug: string;
}

export interface RenderTask {
  /** What the caller sent: incoming HTML (sync) or a local edit in markdown. */
  source: { kind: 'html'; html: string } | { kind: 'markdown'; markdown: string };
  /** The centre's primary host, '' when it has none. */
  host: string;
  locale: string;
  sourceUrl: string;
  /** Source article id → this centre's translation in the same locale (for rewriting links between articles). */
  bySource: Record<string, ArticleLinkTarget>;
  /** Told "started" when a thread picks the task up: the time budget counts from there, not from the queue. */
  started?: MessagePort;
}

export interface Rendered {
  html: string;
  markdown: string;
  excerpt: string;
  sanitizer_version: string;
  sanitize_report: SanitizeResult['sanitize_report'];
  link_report: SanitizeResult['link_report'];
  asset_report: SanitizeResult['asset_report'];
}

export type RenderOutcome = { ok: true; rendered: Rendered } | { ok: false; errors: FieldError[] };

// linkify: bare URLs become links, as marked's GFM mode made them (linkify-it stays linear: 256 KiB of "http://" in 0.2 s).
const markdownIt = new MarkdownIt({ html: true, linkify: true, maxNesting: ARTICLE_LIMITS.markdownNesting });
const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });

class TooComplex extends Error {}

/**
 * The first structural limit the HTML breaks, or undefined. htmlparser2's Parser (the one sanitize-html
 * uses, so depth means the same to both) is stopped at the first excess, which keeps its open-element stack,
 * and so its per-tag cost, bounded by the depth limit: the scan is linear.
 */
export function structureProblem(html: string): string | undefined {
  let depth = 0;
  let elements = 0;
  let attributes = 0;
  const parser = new Parser(
    {
      onopentagname() {
        attributes = 0;
        if (++elements > ARTICLE_LIMITS.htmlElements) throw new TooComplex(`more than ${ARTICLE_LIMITS.htmlElements} elements`);
        if (++depth > ARTICLE_LIMITS.htmlDepth) throw new TooComplex(`elements nested more than ${ARTICLE_LIMITS.htmlDepth} deep`);
      },
      onattribute() {
        if (++attributes > ARTICLE_LIMITS.attributesPerElement) throw new TooComplex(`an element with more than ${ARTICLE_LIMITS.attributesPerElement} attributes`);
      },
      onclosetag() {
        depth--;
      },
    },
    { decodeEntities: false, lowerCaseTags: true, lowerCaseAttributeNames: false },
  );
  try {
    parser.write(html);
    parser.end();
  } catch (err) {
    if (err instanceof TooComplex) return err.message;
    throw err;
  }
  return undefined;
}

/**
 * Each `[text](url)` (`![alt](src)` when `image`) replaced by its text, or by nothing. A scan rather than a
 * regular expression: `\[[^\]]*\]\([^)]*\)` backtracks quadratically over a run of "[". The first "]"
 * and ")" found are remembered, so no stretch of the text is searched twice.
 */
function replaceLinks(s: string, image: boolean, keepText: boolean): string {
  const open = image ? '![' : '[';
  let out = '';
  let from = 0;
  let at = s.indexOf(open);
  let close = -1;
  let paren = -1;
  while (at !== -1) {
    const textStart = at + open.length;
    if (close < textStart) close = s.indexOf(']', textStart);
    if (close === -1) break;
    if (s[close + 1] === '(') {
      if (paren < close + 2) paren = s.indexOf(')', close + 2);
      if (paren === -1) break;
      out += s.slice(from, at) + (keepText ? s.slice(textStart, close) : '');
      from = paren + 1;
      at = s.indexOf(open, from);
    } else {
      at = s.indexOf(open, at + 1);
    }
  }
  return out + s.slice(from);
}

/** The first 200 characters of the text a reader sees: images dropped, links reduced to their text. */
export const excerptOf = (markdown: string) =>
  replaceLinks(replaceLinks(markdown, true, false), false, true)
    .replace(/[#*_`>]/g, '')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 200);

/** Renders one body for one centre and locale: links to other source articles become ours. */
export function renderArticle(task: Omit<RenderTask, 'started'>): RenderOutcome {
  const field = task.source.kind === 'html' ? 'body.body_html' : 'body.body_markdown';
  const html = task.source.kind === 'html' ? task.source.html : markdownIt.render(task.source.markdown);
  const problem = structureProblem(html);
  if (problem) {
    const what = task.source.kind === 'html' ? 'body_html has' : 'body_markdown renders to HTML with';
    return { ok: false, errors: [{ path: field, message: `${what} ${problem}` }] };
  }
  const sourceHost = (() => {
    try {
      return new URL(task.sourceUrl).hostname;
    } catch {
      return '';
    }
  })();
  const { host, locale, bySource } = task;
  const r = sanitize(html, {
    knownHosts: [host, sourceHost].filter(Boolean),
    rewriteArticleLink: (href) => {
      const id = /\/articles\/([A-Za-z0-9_-]+?)(?:-[^/?#]*)?(?:[/?#]|$)/.exec(href)?.[1];
      const target = id && Object.hasOwn(bySource, id) ? bySource[id] : undefined;
      return target && host ? `https://${host}/${locale}/articles/${target.article_id}-${target.slug}` : undefined;
    },
  });
  // The editable text: a local edit keeps its own markdown; the source's HTML is turned into markdown.
  const markdown = task.source.kind === 'markdown' ? task.source.markdown : turndown.turndown(r.html);
  return {
    ok: true,
    rendered: {
      html: r.html,
      markdown,
      excerpt: excerptOf(markdown),
      sanitizer_version: r.sanitizer_version,
      sanitize_report: r.sanitize_report,
      link_report: r.link_report,
      asset_report: r.asset_report,
    },
  };
}

/** The worker thread's entry (see render-thread.js): reports that it started, then renders. */
export function renderInThread(task: RenderTask): RenderOutcome {
  task.started?.postMessage('started');
  task.started?.close();
  return renderArticle(task);
}
