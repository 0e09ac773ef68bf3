/**
 * Browser check (issue 10, item 4): the service's /docs (Redoc) and /admin/queues (Bull Board) opened in
 * headless Debian Chromium driven by playwright-core, asserting that the operation list and the queue list
 * actually render, that nothing errors in the page, and that nothing is fetched from outside localhost.
 * Issue 33: the web chat widget (docs/web-chat-widget.html), served from another origin, talks to the real
 * service: a visitor's message reaches a ticket, and the agent's reply appears in the page.
 * `npm test` installs chromium (scripts/lib.sh ensure_chromium); where it cannot, this file skips loudly.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { buildOperationTable } from '../src/operations';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect } from './helpers/ingest';
import { eventually } from './helpers/wait';
import { useTestApp } from './helpers/use-test-app';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const OPS = { username: 'ops', password: 'browser-check-password' };
const QUEUES = ['ingest', 'webhooks', 'mailbox', 'outbound', 'rollups', 'maintenance', 'events', 'deliveries', 'files'];
/** Operations named here on purpose, so an emptied or renamed table cannot make the check pass vacuously. */
const NAMED_OPERATIONS = ['create_api_key', 'list_members', 'create_ticket', 'list_tickets', 'ingest_channel_message', 'create_integration', 'patch_my_tenant'];

const available = existsSync(CHROMIUM);
if (!available) {
  console.warn(
    `BROWSER CHECK DID NOT RUN: ${CHROMIUM} is missing, so /docs and /admin/queues were NOT checked in a browser. ` +
      'npm test installs Debian\'s chromium package when it runs as root with apt-get; install it (apt-get install chromium) and rerun.',
  );
}
const describeBrowser = available ? describe : describe.skip;

/** What a page did while it loaded: every request URL, and everything that went wrong. */
interface PageRecord {
  requests: string[];
  external: string[];
  problems: string[];
}

const isLocal = (url: string) => {
  const { protocol, hostname } = new URL(url);
  if (protocol === 'data:' || protocol === 'blob:' || protocol === 'about:') return true;
  return hostname === '127.0.0.1' || hostname === 'localhost' || hostname === '[::1]';
};

/**
 * Records requests, page errors, console errors and failed local responses. Requests to other hosts are
 * recorded and then aborted, so the check never reaches the network and a CDN dependency shows as a finding.
 * A 404 for /favicon.ico is tolerated: Chromium may probe it on its own; neither page asks for it.
 */
async function watch(page: Page): Promise<PageRecord> {
  const record: PageRecord = { requests: [], external: [], problems: [] };
  const isFavicon = (url: string) => isLocal(url) && new URL(url).pathname === '/favicon.ico';
  await page.route('**/*', (route) => (isLocal(route.request().url()) ? route.continue() : route.abort('blockedbyclient')));
  page.on('request', (req) => {
    record.requests.push(req.url());
    if (!isLocal(req.url())) record.external.push(req.url());
  });
  page.on('pageerror', (err) => record.problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const at = msg.location().url;
    // A refused outside request also logs a console error; it is reported once, as an external request.
    if (at && (!isLocal(at) || isFavicon(at))) return;
    record.problems.push(`console error: ${msg.text()}${at ? ` (at ${at})` : ''}`);
  });
  page.on('requestfailed', (req) => {
    if (isLocal(req.url())) record.problems.push(`request failed: ${req.url()} ${req.failure()?.errorText ?? ''}`);
  });
  page.on('response', (res) => {
    if (isLocal(res.url()) && res.status() >= 400 && !isFavicon(res.url())) record.problems.push(`HTTP ${res.status()} for ${res.url()}`);
  });
  return record;
}

describeBrowser('browser check: /docs and /admin/queues in headless Chromium', () => {
  let browser: Browser;
  let base: string;
  const operations = buildOperationTable();

  const { ctx } = useTestApp({
    env: { OPS_USER: OPS.username, OPS_PASSWORD: OPS.password },
    teardown: async () => {
      await browser?.close();
    },
  });
  beforeAll(async () => {
    const address = ctx.server.address();
    if (!address || typeof address === 'string') throw new Error('the test app is not listening on a TCP port');
    base = `http://127.0.0.1:${address.port}`;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });

  describe('/docs (Redoc over the generated OpenAPI document, no credentials)', () => {
    let context: BrowserContext;
    let page: Page;
    let record: PageRecord;
    let rendered: { sections: { id: string; heading: string }[]; menu: { id: string; label: string }[] };

    beforeAll(async () => {
      context = await browser.newContext();
      page = await context.newPage();
      record = await watch(page);
      const res = await page.goto(`${base}/docs`);
      expect(res?.status()).toBe(200);
      // Redoc renders one section per operation, anchored at its documented deep link `#operation/<operationId>`.
      const sections = page.locator('[data-section-id^="operation/"]');
      await sections.first().waitFor({ state: 'attached', timeout: 20_000 });
      // Give it time to reach the table's length; a shortfall is then reported, with the missing ids, by the tests below.
      await sections.nth(operations.length - 1).waitFor({ state: 'attached', timeout: 10_000 }).catch(() => undefined);
      await page.waitForLoadState('networkidle');
      rendered = {
        sections: await page.locator('[data-section-id^="operation/"]').evaluateAll((els) =>
          els.map((el) => ({ id: String(el.getAttribute('data-section-id')).slice('operation/'.length), heading: el.querySelector('h2')?.textContent?.trim() ?? '' })),
        ),
        menu: await page.locator('li[role="menuitem"][data-item-id*="/operation/"]').evaluateAll((els) =>
          els.map((el) => ({ id: String(el.getAttribute('data-item-id')).replace(/^.*\/operation\//, ''), label: el.getAttribute('aria-label') ?? '' })),
        ),
      };
    }, 45_000);
    afterAll(async () => {
      await context?.close();
    });

    test('renders a section for every operation of the table, headed by its summary', () => {
      expect(operations.length).toBeGreaterThan(50);
      expect(rendered.sections.length).toBeGreaterThanOrEqual(operations.length);
      expect(rendered.sections.map((s) => s.id).sort()).toEqual(operations.map((op) => op.id).sort());
      const headings = new Map(rendered.sections.map((s) => [s.id, s.heading]));
      for (const op of operations) expect([op.id, headings.get(op.id)]).toEqual([op.id, op.summary]);
    });

    // Redoc keeps a tag's menu group collapsed until its section scrolls into view, so the menu is checked by content.
    test('lists every operation in the side menu under its summary', () => {
      expect(rendered.menu.map((m) => m.id).sort()).toEqual(operations.map((op) => op.id).sort());
      const labels = new Map(rendered.menu.map((m) => [m.id, m.label]));
      for (const op of operations) expect([op.id, labels.get(op.id)]).toEqual([op.id, op.summary]);
    });

    test.each(NAMED_OPERATIONS)('shows %s on screen: a visible heading with its summary', async (id) => {
      const op = operations.find((o) => o.id === id);
      expect(op).toBeDefined();
      const heading = page.locator(`[data-section-id="operation/${id}"] h2`).first();
      await heading.scrollIntoViewIfNeeded({ timeout: 5_000 });
      expect(await heading.isVisible()).toBe(true);
      expect((await heading.innerText()).trim()).toBe(op!.summary);
    });

    test('loads without page errors, console errors or failed local requests', () => {
      expect(record.problems).toEqual([]);
      expect(record.requests).toContain(`${base}/docs/redoc.standalone.js`);
      expect(record.requests).toContain(`${base}/v1/openapi.json`);
    });

    test('fetches nothing from outside localhost (no CDN)', () => {
      expect(record.external).toEqual([]);
    });
  });

  describe('/admin/queues (Bull Board behind operator basic auth)', () => {
    let context: BrowserContext;
    let page: Page;
    let record: PageRecord;
    let rendered: { overview: string[]; menu: string[] };

    beforeAll(async () => {
      context = await browser.newContext({ httpCredentials: OPS });
      page = await context.newPage();
      record = await watch(page);
      const res = await page.goto(`${base}/admin/queues`);
      expect(res?.status()).toBe(200);
      // Bull Board's CSS class names are build hashes; its routes are not: each queue links to <base>/queue/<name>.
      // One API response renders every card at once; a missing or extra queue is then reported by the tests below.
      await page.locator('main a[href^="/admin/queues/queue/"]').first().waitFor({ timeout: 20_000 });
      await page.waitForLoadState('networkidle');
      rendered = {
        overview: (await page.locator('main a[href^="/admin/queues/queue/"]').allTextContents()).map((t) => t.trim()),
        menu: (await page.locator('nav a[href^="/admin/queues/queue/"]').allTextContents()).map((t) => t.trim()),
      };
    }, 45_000);
    afterAll(async () => {
      await context?.close();
    });

    test('shows a card for each of the eight queues, and no other', () => {
      expect([...rendered.overview].sort()).toEqual([...QUEUES].sort());
    });

    test('lists each of the eight queues in the side menu', () => {
      expect([...rendered.menu].sort()).toEqual([...QUEUES].sort());
    });

    test.each(QUEUES)('the %s card is visible on screen under its name', async (name) => {
      const link = page.locator(`main a[href="/admin/queues/queue/${name}"]`);
      await link.scrollIntoViewIfNeeded({ timeout: 5_000 });
      expect(await link.isVisible()).toBe(true);
      expect((await link.innerText()).trim()).toBe(name);
    });

    test('loads without page errors, console errors or failed local requests', () => {
      expect(record.problems).toEqual([]);
      expect(record.requests.some((u) => u.startsWith(`${base}/admin/queues/api/queues`))).toBe(true);
    });

    test('fetches nothing from outside localhost (no CDN)', () => {
      expect(record.external).toEqual([]);
    });
  });

  // Last: its workers and jobs would show on the queue cards checked above.
  describe('the web chat widget (docs/web-chat-widget.html) against the real service, from another origin', () => {
    let site: Server;
    let siteOrigin: string;
    let ws: Workspace;
    let token: string;
    let context: BrowserContext;
    let page: Page;
    let record: PageRecord;
    const widget = readFileSync(path.join(__dirname, '..', 'docs', 'web-chat-widget.html'));

    beforeAll(async () => {
      await ctx.startWorkers();
      // The customer's site: serves the widget page as it is shipped, on an origin of its own.
      site = createServer((req, res) => {
        if (req.url?.startsWith('/widget.html')) res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(widget);
        else res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
      siteOrigin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
      ws = await createWorkspace(ctx);
      token = (await connect(ctx, ws, 'web_chat', { config: { allowed_origins: [siteOrigin] } })).details.inbound_token!;
      context = await browser.newContext();
      page = await context.newPage();
      record = await watch(page);
      const res = await page.goto(`${siteOrigin}/widget.html?api=${encodeURIComponent(base)}&token=${encodeURIComponent(token)}`);
      expect(res?.status()).toBe(200);
    }, 45_000);
    afterAll(async () => {
      await context?.close();
      await new Promise<void>((resolve) => (site ? site.close(() => resolve()) : resolve()));
    });

    test('the visitor writes, an agent replies through the API, and the reply appears in the page', async () => {
      const input = page.getByLabel('Message');
      await input.fill('Hi! Do you ship to Canada?');
      await input.press('Enter');
      await page.locator('#log li.visitor', { hasText: 'Hi! Do you ship to Canada?' }).waitFor({ timeout: 15_000 });

      // The agent finds the conversation in the queue and answers it.
      const ticket = await eventually(
        async () => ((await ctx.http.get('/v1/tickets?source=web_chat').set(bearer(ws.ownerKey))).body.tickets as { id: string }[])[0],
        10_000,
        'the web chat ticket',
      );
      await ctx.http.post(`/v1/tickets/${ticket.id}/notes`).set(bearer(ws.ownerKey)).send({ body: 'Internal: check the Canada rates' }).expect(201);
      await ctx.http.post(`/v1/tickets/${ticket.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'Yes! Delivery takes 3 to 5 working days.' }).expect(201);

      const reply = page.locator('#log li.agent', { hasText: 'Yes! Delivery takes 3 to 5 working days.' });
      await reply.waitFor({ timeout: 15_000 });
      expect(await reply.isVisible()).toBe(true);
      expect(await reply.locator('small').innerText()).toBe('Olive Owner');
      expect(await page.locator('#log li').allInnerTexts()).toEqual(['Hi! Do you ship to Canada?', 'Olive Owner\nYes! Delivery takes 3 to 5 working days.']);
      expect(await page.locator('#log').innerText()).not.toContain('Internal');
      expect(record.problems).toEqual([]);
    });

    test('a reload resumes the same visitor: the conversation is shown again from the service', async () => {
      await page.reload();
      await page.locator('#log li.agent').waitFor({ timeout: 15_000 });
      expect(await page.locator('#log li').count()).toBe(2);
    });

    test('cross-origin requests went through CORS without errors, and nothing left localhost', () => {
      // The reload above cut the open stream: that abort is the page's own doing, not a failure.
      const cutByReload = (p: string) => p.startsWith(`request failed: ${base}/v1/web-chat/messages?`) && p.endsWith('net::ERR_ABORTED');
      expect(record.problems.filter((p) => !cutByReload(p))).toEqual([]);
      expect(record.problems.filter(cutByReload).length).toBeLessThanOrEqual(1);
      expect(record.external).toEqual([]);
      expect(record.requests.some((u) => u.startsWith(`${base}/v1/web-chat/messages?`) && u.includes('visitor_token='))).toBe(true);
    });
  });
});
