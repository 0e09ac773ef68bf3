import { Client } from 'pg';

export interface Listener {
  close(): Promise<void>;
}

/**
 * LISTEN on one PostgreSQL channel over a connection of its own (a pooled one would be handed to other
 * queries). A lost connection is reopened after `retryMs`; notifications sent while it was down are lost,
 * which callers cover with a sweep (NOTIFY is a wake-up, never the record).
 */
export function listen(
  databaseUrl: string,
  channel: string,
  onPayload: (payload: string) => void,
  opts: {
    retryMs?: number;
    onError?: (err: Error) => void;
    /** Called each time LISTEN is in place (first connect and every reconnect): nothing was missed from here on. */
    onListening?: () => void;
    /** Called when the listening connection is lost: notifications may be missed until `onListening` again. */
    onLost?: () => void;
  } = {},
): Listener {
  const retryMs = opts.retryMs ?? 1000;
  let closed = false;
  let client: Client | undefined;
  let timer: NodeJS.Timeout | undefined;

  const reopen = () => {
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void open();
    }, retryMs);
    timer.unref();
  };

  async function open() {
    if (closed) return;
    const c = new Client({ connectionString: databaseUrl });
    client = c;
    c.on('notification', (n) => {
      if (n.channel === channel && n.payload) onPayload(n.payload);
    });
    c.on('error', (err) => {
      opts.onLost?.();
      opts.onError?.(err);
      void c.end().catch(() => {});
      reopen();
    });
    c.on('end', () => {
      opts.onLost?.();
      if (client === c) reopen();
    });
    try {
      await c.connect();
      // The channel name is ours (a constant), never a caller's value.
      await c.query(`LISTEN "${channel.replace(/"/g, '')}"`);
      opts.onListening?.();
    } catch (err) {
      opts.onError?.(err as Error);
      await c.end().catch(() => {});
      reopen();
    }
  }
  void open();

  return {
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await client?.end().catch(() => {});
    },
  };
}
