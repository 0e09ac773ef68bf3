import path from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { ConfigSection } from '../../config';
import { dependencyUnavailable, payloadTooComplex } from '../../lib/errors';
import { ARTICLE_LIMITS, type Rendered, type RenderOutcome, type RenderTask } from './render';


/** Refuses a body larger than its limit before any work is spent on it (UTF-8 bytes, as stored). */
export function checkBodySize(field: 'body_html' | 'body_markdown', text: string): void {
  const limit = field === 'body_html' ? ARTICLE_LIMITS.bodyHtmlBytes : ARTICLE_LIMITS.bodyMarkdownBytes;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > limit) {
    throw payloadTooComplex([{ path: `body.${field}`, message: `${field} is ${bytes} bytes; at most ${limit} (${limit / 1024} KiB) are accepted` }]);
  }
}

/**
 * One pool per process, started on first use (a worker process never renders, so it starts no threads) and
 * ended by the runtime's close (server shutdown, the test harness), so nothing keeps the process alive.
 */
let pool: Piscina | undefined;
/** Whether a thread of the current pool has started a task, i.e. finished loading its modules. */
let warm = false;
/**
 * A thread's first start loads tsx and the pipeline's modules (~0.6 s on an idle 2-core machine, seconds on
 * a busy one): until one has, renders wait for it this long instead of answering 503.
 */
const COLD_START_WAIT_MS = 15_000;

function poolFor(config: ConfigSection<'helpCentre'>): Piscina {
  if (!pool) warm = false;
  pool ??= new Piscina({
    filename: path.join(__dirname, 'render-thread.js'),
    // Every thread stays up: one starts in ~0.6 s (tsx, sanitize-html, markdown-it, turndown), so when a
    // render past its budget has its thread stopped, the next render finds the other one warm.
    minThreads: config.RENDER_THREADS,
    maxThreads: config.RENDER_THREADS,
    // Beyond this many waiting renders the answer is 503 at once rather than a longer wait.
    maxQueue: config.RENDER_THREADS * 16,
  });
  return pool;
}

export async function closeRenderPool(): Promise<void> {
  const p = pool;
  pool = undefined;
  await p?.destroy();
}

/**
 * Runs one render in the pool. The budget counts from the moment a thread starts the task (the thread
 * says so through a message port), so waiting behind other renders never makes an article "too complex":
 * a render past its budget has its thread stopped and answers 400 payload_too_complex; a render that waits
 * too long for a thread, or finds the queue full, answers 503 with Retry-After.
 */
export async function renderInPool(config: ConfigSection<'helpCentre'>, task: Omit<RenderTask, 'started'>): Promise<Rendered> {
  const field = task.source.kind === 'html' ? 'body.body_html' : 'body.body_markdown';
  const controller = new AbortController();
  const { port1, port2 } = new MessageChannel();
  let stoppedBy: 'queue' | 'budget' | undefined;
  let budget: NodeJS.Timeout | undefined;
  const queued = setTimeout(
    () => {
      stoppedBy = 'queue';
      controller.abort();
    },
    warm ? config.RENDER_QUEUE_WAIT_MS : Math.max(config.RENDER_QUEUE_WAIT_MS, COLD_START_WAIT_MS),
  );
  port1.once('message', () => {
    warm = true;
    clearTimeout(queued);
    budget = setTimeout(() => {
      stoppedBy = 'budget';
      controller.abort();
    }, config.RENDER_BUDGET_MS);
  });
  let outcome: RenderOutcome;
  try {
    outcome = await poolFor(config).run({ ...task, started: port2 }, { signal: controller.signal, transferList: [port2] });
  } catch (err) {
    if (stoppedBy === 'budget') {
      throw payloadTooComplex([{ path: field, message: `${field.slice('body.'.length)} takes longer than ${config.RENDER_BUDGET_MS} ms to render` }]);
    }
    if (stoppedBy === 'queue' || /Task queue is at limit|No task queue available|Terminating worker thread/.test((err as Error)?.message ?? '')) throw dependencyUnavailable('The article renderer', 1);
    throw err;
  } finally {
    clearTimeout(queued);
    clearTimeout(budget);
    port1.close();
  }
  if (!outcome.ok) throw payloadTooComplex(outcome.errors);
  return outcome.rendered;
}
