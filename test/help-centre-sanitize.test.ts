/**
 * The help centre HTML sanitizer (src/domains/help-centre/sanitize.ts), a pure module: an XSS corpus in the
 * style of the OWASP XSS Filter Evasion Cheat Sheet, each output re-parsed with htmlparser2 and checked
 * against what must never reach a visitor; then the three reports; then that ordinary article content
 * survives. No database or network is touched.
 */
import { Parser } from 'htmlparser2';
import { IFRAME_HOSTS, SANITIZER_VERSION, sanitize } from '../src/domains/help-centre/sanitize';

const CTX = { knownHosts: ['source.test'] };

interface Node {
  tag: string;
  attrs: Record<string, string>;
}

/** Every element of an HTML string as htmlparser2 sees it (entities decoded, names lower-cased). */
function elements(html: string): Node[] {
  const out: Node[] = [];
  const parser = new Parser(
    { onopentag: (tag, attrs) => out.push({ tag, attrs: { ...attrs } }) },
    { decodeEntities: true, lowerCaseTags: true, lowerCaseAttributeNames: true },
  );
  parser.write(html);
  parser.end();
  return out;
}

const FORBIDDEN_TAGS = new Set(['script', 'style', 'link', 'meta', 'base', 'object', 'embed', 'form', 'svg', 'math']);
const FORBIDDEN_ATTRS = new Set(['style', 'srcdoc', 'formaction']);
const BAD_SCHEME = /^(?:javascript|vbscript|data):/;

/** The value a browser would read the scheme from: whitespace and control characters gone, lower-cased. */
// eslint-disable-next-line no-control-regex -- removing them is the point
const normaliseUrl = (v: string) => v.replace(/[\s\u0000-\u001f\u007f-\u009f]/g, '').toLowerCase();

function iframeAllowed(src: string | undefined): boolean {
  if (!src) return false;
  try {
    const u = new URL(src);
    return u.protocol === 'https:' && IFRAME_HOSTS.includes(u.hostname);
  } catch {
    return false;
  }
}

/** Everything in `html` that must not be served; empty when it is safe. */
function violations(html: string): string[] {
  const found: string[] = [];
  if (/<\s*\/?\s*script/i.test(html)) found.push('raw <script in output');
  for (const { tag, attrs } of elements(html)) {
    if (FORBIDDEN_TAGS.has(tag)) found.push(`<${tag}>`);
    if (tag === 'iframe' && !iframeAllowed(attrs.src)) found.push(`<iframe src=${JSON.stringify(attrs.src)}>`);
    for (const [name, value] of Object.entries(attrs)) {
      if (name.startsWith('on')) found.push(`${tag}[${name}]`);
      if (FORBIDDEN_ATTRS.has(name)) found.push(`${tag}[${name}]`);
      if ((name === 'href' || name === 'src') && BAD_SCHEME.test(normaliseUrl(value))) found.push(`${tag}[${name}=${JSON.stringify(value)}]`);
    }
  }
  return found;
}

const B64_SCRIPT = 'PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=='; // <script>alert(1)</script>
const JS_DEC = '&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;';
const JS_DEC_NOSEMI = '&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105&#0000112&#0000116&#0000058';
const JS_HEX = '&#x6A;&#x61;&#x76;&#x61;&#x73;&#x63;&#x72;&#x69;&#x70;&#x74;&#x3A;';
// Every character encoded, as in the cheat sheet: a trailing '&#x3Aalert' would read as U+3AA, not ':'.
const JS_HEX_NOSEMI_ALERT = '&#x6A&#x61&#x76&#x61&#x73&#x63&#x72&#x69&#x70&#x74&#x3A&#x61&#x6C&#x65&#x72&#x74&#x28&#x31&#x29';

/**
 * [name, payload, inert]: inert payloads look hostile but hold nothing the allowlist removes (the markup is
 * inside an allowed attribute's value and is escaped on output); every other payload must be reported.
 */
const CORPUS: [string, string, boolean?][] = [
  // <script> in every spelling
  ['script lower', '<script>alert(1)</script>'],
  ['script upper', '<SCRIPT>alert(1)</SCRIPT>'],
  ['script mixed case', '<ScRiPt>alert(1)</sCrIpT>'],
  ['script src', '<script src="https://evil.test/x.js"></script>'],
  ['script type attr', '<script type="text/javascript">alert(1)</script>'],
  ['script defer inside p', '<p>text<script defer>alert(1)</script></p>'],
  ['script/xss src', '<SCRIPT/XSS SRC="http://evil.test/xss.js"></SCRIPT>'],
  ['script/src', '<SCRIPT/SRC="http://evil.test/xss.js"></SCRIPT>'],
  ['extra open bracket', '<<SCRIPT>alert("XSS");//<</SCRIPT>'],
  ['script no close', '<SCRIPT SRC=http://evil.test/xss.js?< B >'],
  ['nested split script', '<scr<script>ipt>alert(1)</scr</script>ipt>'],
  ['attribute breakout then script', '"><script>alert(1)</script>'],
  // event handlers
  ['img onerror', '<img src=x onerror=alert(1)>'],
  ['img onerror fromCharCode', '<IMG SRC=/ onerror="alert(String.fromCharCode(88,83,83))"></img>'],
  ['img onload on https', '<img src="https://ok.test/a.png" onload="alert(1)">'],
  ['img malformed quotes', '<img """><SCRIPT>alert("XSS")</SCRIPT>">'],
  
  ['img in link onerror', '<a href="https://ok.test/"><img src="x" alt="" onerror=alert(1)></a>'],
  ['svg onload', '<svg onload=alert(1)>'],
  ['svg/onload', '<svg/onload=alert(1)>'],
  ['svg script', '<svg><script>alert(1)</script></svg>'],
  ['body onload', '<body onload=alert(1)>'],
  ['BODY ONLOAD', "<BODY ONLOAD=alert('XSS')>"],
  ['iframe youtube onload', '<iframe src="https://www.youtube.com/embed/x" onload=alert(1)></iframe>'],
  ['video source onerror', '<video><source onerror="alert(1)"></video>'],
  ['video onerror', '<video src=x onerror=alert(1)></video>'],
  ['audio onerror', '<audio src=x onerror=alert(1)>'],
  ['details ontoggle', '<details open ontoggle=alert(1)><summary>x</summary></details>'],
  ['marquee onstart', '<marquee onstart=alert(1)>x</marquee>'],
  ['math maction xlink', '<math><maction actiontype="statusline" xlink:href="javascript:alert(1)">x</maction></math>'],
  ['input autofocus onfocus', '<input autofocus onfocus=alert(1)>'],
  ['select autofocus onfocus', '<select autofocus onfocus=alert(1)></select>'],
  ['textarea autofocus onfocus', '<textarea autofocus onfocus=alert(1)>x</textarea>'],
  ['keygen autofocus onfocus', '<keygen autofocus onfocus=alert(1)>'],
  ['div onmouseover', '<div onmouseover="alert(1)">hover</div>'],
  ['div onpointerenter', '<div id="x" onpointerenter=alert(1)>x</div>'],
  ['a onclick', '<a href="https://ok.test" onclick="alert(1)">x</a>'],
  ['p ONCLICK', '<p ONCLICK=alert(1)>x</p>'],
  ['unclosed tag with handler', '<a href="https://ok.test/" title="x" onmouseover=alert(1) "">x'],
  ['single-quote breakout', "'><img src=x onerror=alert(1)>"],
    // javascript: and friends
  ['a javascript:', '<a href="javascript:alert(1)">x</a>'],
  ['a JaVaScRiPt:', '<a href="JaVaScRiPt:alert(1)">x</a>'],
  ['a leading spaces', '<a href="  javascript:alert(1)">x</a>'],
  ['img javascript: unquoted', "<IMG SRC=javascript:alert('XSS')>"],
  ['img JaVaScRiPt: unquoted', "<IMG SRC=JaVaScRiPt:alert('XSS')>"],
  ['img backtick', '<IMG SRC=`javascript:alert("RSnake says, \'XSS\'")`>'],
  ['decimal entities', `<a href="${JS_DEC}alert(1)">x</a>`],
  ['decimal entities, no semicolons, padded', `<a href="${JS_DEC_NOSEMI}alert(1)">x</a>`],
  ['hex entities', `<a href="${JS_HEX}alert(1)">x</a>`],
  ['hex entities, no semicolons', `<a href="${JS_HEX_NOSEMI_ALERT}">x</a>`],
  ['img decimal entities', `<IMG SRC=${JS_DEC}alert('XSS')>`],
  ['&colon; named entity', '<a href="javascript&colon;alert(1)">x</a>'],
  ['encoded tab', '<a href="jav&#x09;ascript:alert(1)">x</a>'],
  ['encoded newline', '<a href="jav&#x0A;ascript:alert(1)">x</a>'],
  ['encoded CR', '<IMG SRC="jav&#x0D;ascript:alert(\'XSS\');">'],
  ['literal tab', '<a href="jav\tascript:alert(1)">x</a>'],
  ['literal newline', '<a href="java\nscript:alert(1)">x</a>'],
  ['literal NUL', '<a href="java\u0000script:alert(1)">x</a>'],
  ['leading control chars', '<a href=" &#14;  javascript:alert(1)">x</a>'],
  ['vbscript:', '<a href="vbscript:msgbox(1)">x</a>'],
  ['img VBScript:', '<img src="VBScript:msgbox(1)">'],
  ['iframe javascript:', '<iframe src=javascript:alert(1)></iframe>'],
  ['frameset frame javascript:', '<frameset><frame src="javascript:alert(1)"></frameset>'],
  ['img dynsrc', '<img dynsrc="javascript:alert(1)" src="https://ok.test/a.png">'],
  ['table background', '<table background="javascript:alert(1)"><tr><td>x</td></tr></table>'],
  ['isindex action', '<isindex action=javascript:alert(1) type=submit value=click>'],
  // data: URLs, srcdoc, formaction, xlink:href
  ['a data: base64', `<a href="data:text/html;base64,${B64_SCRIPT}">x</a>`],
  ['a DaTa: inline', '<a href="DaTa:text/html,<script>alert(1)</script>">x</a>'],
  ['img data: html', `<img src="data:text/html;base64,${B64_SCRIPT}">`],
  ['iframe data:', `<iframe src="data:text/html;base64,${B64_SCRIPT}"></iframe>`],
  ['object data:', `<object data="data:text/html;base64,${B64_SCRIPT}"></object>`],
  ['object javascript:', '<object data="javascript:alert(1)"></object>'],
  ['object scriptlet', '<object type="text/x-scriptlet" data="https://evil.test/scriptlet.html"></object>'],
  ['embed javascript:', '<embed src="javascript:alert(1)">'],
  ['embed data: svg', `<embed src="data:image/svg+xml;base64,${B64_SCRIPT}">`],
  ['iframe srcdoc', '<iframe srcdoc="<script>alert(1)</script>"></iframe>'],
  ['youtube iframe srcdoc', '<iframe src="https://www.youtube.com/embed/x" srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>'],
  ['form button formaction', '<form><button formaction="javascript:alert(1)">x</button></form>'],
  ['bare button formaction', '<button formaction=javascript:alert(1)>x</button>'],
  ['svg a xlink:href', '<svg><a xlink:href="javascript:alert(1)"><text x="20" y="20">XSS</text></a></svg>'],
  ['svg use data:', `<svg><use href="data:image/svg+xml;base64,${B64_SCRIPT}"></use></svg>`],
  // style attributes and sheets, meta, base
  ['style expression()', '<div style="width: expression(alert(\'XSS\'));">x</div>'],
  ['style url(javascript:)', '<div style="background-image: url(javascript:alert(1))">x</div>'],
  ['style behavior', '<p STYLE="behavior: url(xss.htc);">x</p>'],
  ['unknown tag with style', '<xss style="xss:expression(alert(1))">x</xss>'],
  ['<style> @import', "<style>@import 'https://evil.test/xss.css';</style>"],
  ['<STYLE> -moz-binding', '<STYLE>BODY{-moz-binding:url("http://evil.test/xssmoz.xml#xss")}</STYLE>'],
  ['link stylesheet javascript:', '<link rel="stylesheet" href="javascript:alert(1)">'],
  ['LINK stylesheet http', '<LINK REL="stylesheet" HREF="http://evil.test/xss.css">'],
  ['meta refresh javascript:', '<meta http-equiv="refresh" content="0;url=javascript:alert(1);">'],
  ['META refresh data:', `<META HTTP-EQUIV="refresh" CONTENT="0;url=data:text/html;base64,${B64_SCRIPT}">`],
  ['base javascript:', '<base href="javascript:alert(1)//">'],
  ['BASE https', '<BASE HREF="https://evil.test/">'],
  // comments
  ['comment hiding script', '<!--<script>alert(1)</script>-->'],
  ['conditional comment', "<!--[if gte IE 4]><SCRIPT>alert('XSS');</SCRIPT><![endif]-->"],
  ['--!> comment close', '<!-- --!><img src=x onerror=alert(1)> -->'],
  // mXSS-style nesting
  ['noscript title breakout', '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>'],
  ['noscript img', '<noscript><img src=x onerror=alert(1)></noscript>'],
  ['math mglyph style', '<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>'],
  ['svg p style', '<svg></p><style><a id="</style><img src=1 onerror=alert(1)>">'],
  ['form math mglyph', '<form><math><mtext></form><form><mglyph><style></math><img src onerror=alert(1)>'],
  ['title breakout', '<title><img src=x onerror=alert(1)></title>'],
  ['select option', '<select><option><img src=x onerror=alert(1)></option></select>'],
  // raw-text containers
  ['template script', '<template><script>alert(1)</script></template>'],
  ['template img', '<template><img src=x onerror=alert(1)></template>'],
  ['xmp', '<xmp><img src=x onerror=alert(1)></xmp>'],
  ['plaintext', '<plaintext><img src=x onerror=alert(1)>'],
  ['noembed', '<noembed><img src=x onerror=alert(1)></noembed>'],
  // frames not on the allowlist
  ['iframe evil host', '<iframe src="https://evil.test/phish"></iframe>'],
  ['iframe lookalike host', '<iframe src="https://www.youtube.com.evil.test/embed/x"></iframe>'],
  ['iframe userinfo trick', '<iframe src="https://www.youtube.com@evil.test/"></iframe>'],
  ['iframe protocol-relative', '<iframe src="//www.youtube.com/embed/x"></iframe>'],
  ['iframe http on allowed host', '<iframe src="http://www.youtube.com/embed/x"></iframe>'],
  // A tag cut off by the end of input is no element (to htmlparser2 or to a browser): nothing to remove.
  ['unterminated img at end of input', '<img src=x onerror=alert(1)//', true],
  ['unterminated quoted img at end of input', '<img src="x" onerror="alert(1)"', true],
  // hostile text in an allowed attribute: escaped, nothing to remove
  ['quote breakout inside title', '<a title=\'"><script>alert(1)</script>\'>x</a>', true],
  ['closing tag inside title', '<div title="</div><script>alert(1)</script>">x</div>', true],
];

describe('sanitize: XSS corpus', () => {
  test('the oracle is not vacuous: it flags the raw hostile payloads', () => {
    const missed = CORPUS.filter(([, payload, inert]) => !inert && violations(payload).length === 0).map(([name]) => name);
    // Hostile through something the checks above do not look at, or only to a browser's parser (htmlparser2 has
    // no noscript/title/xmp/comment quirks); the report test still requires the sanitizer to remove something.
    const knownMisses = [
      '--!> comment close', 'img backtick', 'img dynsrc', 'isindex action', 'noscript title breakout', 'table background',
      'title breakout', 'unknown tag with style', 'xmp',
    ];
    expect(missed.filter((n) => !knownMisses.includes(n))).toEqual([]);
    expect(missed.length).toBeLessThanOrEqual(knownMisses.length);
  });

  test.each(CORPUS)('%s: nothing dangerous survives', (_name, payload) => {
    const out = sanitize(payload, CTX);
    expect({ input: payload, output: out.html, violations: violations(out.html) }).toEqual({ input: payload, output: out.html, violations: [] });
  });

  test.each(CORPUS.filter(([, , inert]) => !inert))('%s: the removal is reported', (_name, payload) => {
    const out = sanitize(payload, CTX);
    expect({ input: payload, output: out.html, total_removed: out.sanitize_report.total_removed > 0 }).toEqual({ input: payload, output: out.html, total_removed: true });
  });
});

describe('sanitize: reports', () => {
  test('sanitize_report counts removed tags and attributes by name', () => {
    const input =
      '<div onclick="x()" style="color:red"><script>a()</script><p onmouseover="y()">t</p><style>p{}</style>' +
      '<img src="https://cdn.test/a.png" onerror="z()"><a href="javascript:alert(1)" onclick="q()">l</a>' +
      '<object data="x"></object><script>b()</script><!-- c --></div>';
    const out = sanitize(input, CTX);
    expect(out.sanitize_report).toEqual({
      removed_tags: { script: 2, style: 1, object: 1, '#comment': 1 },
      removed_attributes: { onclick: 2, style: 1, onmouseover: 1, onerror: 1, href: 1 },
      total_removed: 11,
    });
    expect(out.html).toBe('<div><p>t</p><img src="https://cdn.test/a.png" /><a>l</a></div>');
  });

  test('sanitize_report is empty for clean input', () => {
    expect(sanitize('<p>Hello <a href="https://source.test/x">there</a></p>', CTX).sanitize_report).toEqual({
      removed_tags: {},
      removed_attributes: {},
      total_removed: 0,
    });
  });

  test('link_report: source article rewritten, http known host upgraded, external listed and given rel', () => {
    const rewriteArticleLink = (href: string) => /^https:\/\/source\.test\/hc\/articles\/(\d+)/.exec(href)?.[1]?.replace(/^/, '/help/articles/');
    const input =
      '<p><a href="https://source.test/hc/articles/42-reset-password">reset</a> ' +
      '<a href="http://source.test/status">status</a> ' +
      '<a href="https://evil.test/page" rel="opener" target="_blank">elsewhere</a></p>';
    const out = sanitize(input, { knownHosts: ['source.test'], rewriteArticleLink });
    expect(out.link_report).toEqual({
      rewritten: [
        { from: 'https://source.test/hc/articles/42-reset-password', to: '/help/articles/42', reason: 'source_article' },
        { from: 'http://source.test/status', to: 'https://source.test/status', reason: 'https_upgrade' },
      ],
      external: ['https://evil.test/page'],
    });
    const links = elements(out.html).filter((e) => e.tag === 'a');
    expect(links.map((l) => l.attrs)).toEqual([
      { href: '/help/articles/42' },
      { href: 'https://source.test/status' },
      { href: 'https://evil.test/page', rel: 'noopener noreferrer nofollow', target: '_blank' },
    ]);
  });

  test('asset_report: images kept, upgraded and dropped; files listed; embeds kept and dropped', () => {
    const dataUri = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==';
    const input =
      '<p><img src="https://images.example/a.png" alt="a">' +
      '<img src="http://source.test/b.png" alt="b">' +
      `<img src="${dataUri}" alt="c">` +
      '<a href="https://source.test/files/guide.pdf">guide</a></p>' +
      '<iframe src="https://www.youtube.com/embed/abc123" allowfullscreen></iframe>' +
      '<iframe src="https://evil.test/embed/abc123"></iframe>';
    const out = sanitize(input, CTX);
    expect(out.asset_report.assets).toEqual([
      { src: 'https://images.example/a.png', kind: 'image', outcome: 'kept' },
      { src: 'http://source.test/b.png', kind: 'image', outcome: 'rewritten', to: 'https://source.test/b.png' },
      { src: dataUri, kind: 'image', outcome: 'dropped' },
      { src: 'https://source.test/files/guide.pdf', kind: 'file', outcome: 'kept' },
      { src: 'https://www.youtube.com/embed/abc123', kind: 'embed', outcome: 'kept' },
      { src: 'https://evil.test/embed/abc123', kind: 'embed', outcome: 'dropped' },
    ]);
    const els = elements(out.html);
    expect(els.filter((e) => e.tag === 'img').map((e) => e.attrs)).toEqual([
      { src: 'https://images.example/a.png', alt: 'a' },
      { src: 'https://source.test/b.png', alt: 'b' },
    ]);
    expect(els.filter((e) => e.tag === 'iframe').map((e) => e.attrs.src)).toEqual(['https://www.youtube.com/embed/abc123']);
    expect(out.html).not.toContain('data:');
    expect(out.html).not.toContain('evil.test');
  });
});

describe('sanitize: safe content survives', () => {
  /** Open tags with their attributes, decoded text runs (whitespace-only runs dropped) and close tags, in order. */
  function structure(html: string): string[] {
    const out: (string | { text: string })[] = [];
    const parser = new Parser(
      {
        onopentag: (tag, attrs) => out.push(`<${tag}${Object.entries(attrs).sort().map(([k, v]) => ` ${k}=${JSON.stringify(v)}`).join('')}>`),
        // The parser may split one run of text around entities: join adjacent pieces.
        ontext: (text) => {
          const last = out[out.length - 1];
          if (typeof last === 'object') last.text += text;
          else out.push({ text });
        },
        onclosetag: (tag) => out.push(`</${tag}>`),
      },
      { decodeEntities: true },
    );
    parser.write(html);
    parser.end();
    return out.flatMap((t) => (typeof t === 'string' ? [t] : t.text.trim() ? [JSON.stringify(t.text)] : []));
  }

  const SAFE: [string, string][] = [
    ['headings', '<h1>Title</h1><h2 id="setup">Setup</h2><h3>Step</h3><h6>Small</h6>'],
    ['lists', '<ul><li>one</li><li>two<ol start="3" type="a"><li>nested</li></ol></li></ul><dl><dt>term</dt><dd>definition</dd></dl>'],
    [
      'tables',
      '<table><caption>Plans</caption><thead><tr><th scope="col">Plan</th><th colspan="2">Price</th></tr></thead>' +
        '<tbody><tr><td>Basic</td><td rowspan="2">$0</td><td>free</td></tr></tbody><tfoot><tr><td>end</td></tr></tfoot></table>',
    ],
    ['code blocks', '<pre class="language-ts"><code class="language-ts">if (a &lt; b &amp;&amp; c &gt; d) { return "&lt;script&gt;"; }</code></pre><p>Run <code>npm test</code> or press <kbd>Ctrl</kbd>.</p>'],
    [
      'links',
      '<p><a href="https://source.test/docs" title="Docs">docs</a>, <a href="mailto:help@source.test">mail</a>, ' +
        '<a href="tel:+15551234567">call</a>, <a href="/help/articles/7">relative</a>, <a href="#top">anchor</a></p>',
    ],
    ['images', '<figure><img src="https://images.example/screen.png" alt="Screenshot" width="640" height="480" /><figcaption>The screen</figcaption></figure>'],
    ['text with entities', '<p>Tom &amp; Jerry &lt;3 &quot;quotes&quot; &copy; 2026 &mdash; caf&eacute; &#8364;5 &#x2713;</p>'],
    ['inline formatting', '<p><strong>bold</strong> <em>em</em> <u>u</u> <s>s</s> H<sub>2</sub>O x<sup>2</sup> <mark>hi</mark> <abbr title="HyperText">HTML</abbr></p><blockquote><p>quoted</p></blockquote><hr />'],
    ['details', '<details><summary>More</summary><p>Hidden text</p></details>'],
    ['allowed embed', '<iframe src="https://player.vimeo.com/video/1" width="640" height="360" title="Video" allowfullscreen frameborder="0"></iframe>'],
  ];

  test.each(SAFE)('%s render unchanged in meaning', (_name, input) => {
    const out = sanitize(input, CTX);
    expect(structure(out.html)).toEqual(structure(input));
    expect(out.sanitize_report.total_removed).toBe(0);
  });

  test('plain text keeps its characters and stays text', () => {
    const out = sanitize('5 < 6 & 7 > 3, "quoted" \'single\'', CTX);
    expect(structure(out.html)).toEqual([JSON.stringify('5 < 6 & 7 > 3, "quoted" \'single\'')]);
    expect(elements(out.html)).toEqual([]);
  });

  test('sanitizer_version is SANITIZER_VERSION', () => {
    expect(SANITIZER_VERSION).toMatch(/^hc-sanitizer-\S+$/);
    expect(sanitize('<p>x</p>', CTX).sanitizer_version).toBe(SANITIZER_VERSION);
  });
});

describe('reports agree with the output for image sources of a scheme images may not use', () => {
  it('drops <img src="tel:123"> and reports it dropped and removed', () => {
    const r = sanitize('<img src="tel:123">', { knownHosts: [] });
    expect(r.html).toBe('');
    expect(r.asset_report.assets).toEqual([{ src: 'tel:123', kind: 'image', outcome: 'dropped' }]);
    expect(r.sanitize_report.removed_attributes).toEqual({ src: 1 });
  });
});
