/*
 * A live feed, said without a transport (issue 35). A domain that tails something live (the event log, a web
 * chat visitor's conversation) decides what to send, when, and how far a reader may fall behind; it writes
 * items to a Feed and never bytes of a wire format. The HTTP side frames them (src/http/sse.ts: Server-Sent
 * Events), so a domain imports nothing of src/http (test/layering.test.ts) and another transport (a WebSocket)
 * would frame the same items its own way.
 */

/** One thing a reader is sent. */
export interface FeedItem {
  /** Where the reader resumes after this item (it hands it back to resume: SSE's Last-Event-ID). */
  readonly id?: string;
  /** What the item is: an event type, `message`, `session_ended`. */
  readonly kind: string;
  /** The item itself, as JSON text. */
  readonly json: string;
}

/**
 * Items sent together, in order, as one write. One batch may go to many readers (the event streams of a
 * workspace share each page of the log), so a transport may encode a batch once and keep that encoding for as
 * long as the batch lives (keyed by its identity): a batch is never changed once given to a feed.
 */
export interface FeedBatch {
  readonly items: readonly FeedItem[];
}

/**
 * Where a live reader is sent items. Backpressure is the writer's to honour: `send` and `heartbeat` say whether
 * the reader's buffer is still below its high-water mark, and `drained` waits until it is, or says the reader
 * stayed behind.
 */
export interface Feed {
  /** Sends a batch; false when the reader's buffer is now at or above its high-water mark (or the reader is gone). */
  send(batch: FeedBatch): boolean;
  /** The bytes sending `batch` writes: what a budget of bytes per turn of the event loop counts. */
  size(batch: FeedBatch): number;
  /** A sign of life for an idle reader; with `resumeAfter`, it also moves where the reader resumes, without an item. */
  heartbeat(resumeAfter?: string): boolean;
  /** True once the buffer is below the high-water mark; false when it is still above it after `ms`, or the reader left. */
  drained(ms: number): Promise<boolean>;
  /** Aborted when the reader goes away. */
  readonly signal: AbortSignal;
}

/** A feed's body: runs until the reader leaves or the feed ends (the transport then closes the connection). */
export type FeedRun = (out: Feed) => Promise<void>;
