/**
 * The client the fault tests put in front of the service: it sends each delivery until it is accepted
 * (200 or 202), honouring Retry-After on 503 and 429 exactly as a provider's retrying sender would, and
 * retrying after a short pause when the connection itself fails. It records every answer so the tests can
 * check what the service said while a dependency was down.
 */
import { sleep } from '../helpers/wait';

export interface Answer {
  route: string;
  status: number;
  retryAfter: string | null;
  contentType: string | null;
  code?: string;
  at: number;
}

export interface Delivery {
  route: string;
  url: string;
  body: string;
  headers?: Record<string, string>;
}

export class RetryingClient {
  readonly answers: Answer[] = [];
  readonly networkErrors: { route: string; message: string; at: number }[] = [];
  accepted = 0;

  constructor(private readonly opts: { maxAttempts?: number } = {}) {}

  /** Sends until accepted; throws if a delivery is still refused after maxAttempts (default 40). */
  async deliver(d: Delivery): Promise<Answer> {
    for (let attempt = 1; attempt <= (this.opts.maxAttempts ?? 40); attempt += 1) {
      let res: Response;
      try {
        res = await fetch(d.url, { method: 'POST', headers: { 'content-type': 'application/json', ...d.headers }, body: d.body });
      } catch (err) {
        this.networkErrors.push({ route: d.route, message: (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message, at: Date.now() });
        await sleep(500);
        continue;
      }
      const text = await res.text();
      let code: string | undefined;
      try {
        code = (JSON.parse(text) as { code?: string }).code;
      } catch {
        code = undefined;
      }
      const answer: Answer = { route: d.route, status: res.status, retryAfter: res.headers.get('retry-after'), contentType: res.headers.get('content-type'), code, at: Date.now() };
      this.answers.push(answer);
      if (res.status === 200 || res.status === 202) {
        this.accepted += 1;
        return answer;
      }
      if (res.status === 503 || res.status === 429) {
        const seconds = Number(answer.retryAfter);
        if (!Number.isInteger(seconds) || seconds < 0) throw new Error(`${d.route}: ${res.status} without an integer Retry-After`);
        await sleep(seconds * 1000);
        continue;
      }
      throw new Error(`${d.route}: unexpected ${res.status} ${text.slice(0, 300)}`);
    }
    throw new Error(`${d.route}: still refused after ${this.opts.maxAttempts ?? 40} attempts`);
  }

  /** Delivers everything with `concurrency` senders; `onProgress` sees the number accepted so far. */
  async deliverAll(deliveries: Delivery[], concurrency: number, onProgress?: (accepted: number) => void): Promise<void> {
    let next = 0;
    const sender = async () => {
      while (next < deliveries.length) {
        const d = deliveries[next]!;
        next += 1;
        await this.deliver(d);
        onProgress?.(this.accepted);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, sender));
  }
}
