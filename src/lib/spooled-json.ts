import { PassThrough, type Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { jsonParser } from 'stream-json/core/parser.js';

/**
 * A JSON body too large to hold, read as it arrives (issue 34). Postmark posts an inbound email with its files
 * inside the JSON, base64 in `Attachments[].Content`, up to 35 MB of mail. Buffering and `JSON.parse` of that
 * would hold the bytes (several times over) and the event loop for tens of milliseconds. Here the bytes go through
 * stream-json's tokenizer a network chunk at a time (linear: its patterns are bounded character classes), the
 * object is assembled from its tokens, and the strings at the paths the caller names are written on to a store
 * as they arrive instead of being kept: the object holds `''` there, and the holder object carries where the
 * text went (`spooledMember`). Everything that is kept counts against `maxInlineBytes`; the whole body against
 * `maxBytes`; nesting and value counts against the same limits as every JSON body.
 */

/** A string value written to the store instead of the object. `adopted` is set by whoever takes it on. */
export interface SpooledString {
  key: string;
  /** Its length in UTF-16 code units (base64 text: its characters). */
  length: number;
  adopted: boolean;
}

const SPOOLED = Symbol('spooled members');
type Holder = { [SPOOLED]?: Record<string, SpooledString> };

/** Where `holder[member]`'s text went, when it was spooled (its value in the object is then ''). */
export function spooledMember(holder: unknown, member: string): SpooledString | undefined {
  if (typeof holder !== 'object' || holder === null) return undefined;
  return (holder as Holder)[SPOOLED]?.[member];
}

export type SpoolFailure = 'too_large' | 'inline_too_large' | 'malformed' | 'too_deep' | 'too_many';

export class SpoolError extends Error {
  constructor(readonly reason: SpoolFailure, message: string) {
    super(message);
  }
}

export interface SpoolOptions {
  /** The whole body, in bytes. */
  maxBytes: number;
  /** What is kept in memory: keys, numbers and the strings that are not spooled, in UTF-16 code units. */
  maxInlineBytes: number;
  maxDepth: number;
  /** Containers, members and elements, as for every JSON body. */
  maxValues: number;
  /** Whether the string at this path is spooled. Called once per string value, with the path from the root. */
  spill(path: readonly (string | number)[]): boolean;
  /** Writes one spooled string (its text as it arrives, at most `maxChars`); answers its key once stored. */
  store(text: Readable, maxChars: number): Promise<string>;
  /** Removes what `store` wrote, when the body turns out unusable. */
  remove(key: string): Promise<void>;
}

const SINK_PIECE = 64 * 1024;

type Frame = { kind: 'object'; value: Record<string, unknown> & Holder; key: string | null } | { kind: 'array'; value: unknown[] };

/**
 * Reads a JSON document from `source`. Answers the value and every spooled string; on any failure the spooled
 * strings written so far are removed and a SpoolError (or the store's own error) is thrown.
 */
export async function readSpooledJson(source: AsyncIterable<Buffer | string>, opts: SpoolOptions): Promise<{ value: unknown; spooled: SpooledString[] }> {
  // Keys, strings and numbers as pieces: nothing the caller sends is accumulated by the tokenizer itself.
  const tokenize = jsonParser({ packKeys: false, packStrings: false, packNumbers: false });
  const decoder = new StringDecoder('utf8');
  const spooled: SpooledString[] = [];
  const pending: Promise<unknown>[] = [];
  const stack: Frame[] = [];
  let root: unknown;
  let haveRoot = false;
  let bytes = 0;
  let inline = 0;
  let values = 0;
  // The piece being read: a key, a kept string, a number, or a spooled string's sink.
  let piece: { kind: 'key' | 'string' | 'number'; text: string } | null = null;
  let sink: { out: PassThrough; chars: number; entry: SpooledString; parts: string[]; held: number } | null = null;

  const keep = (n: number) => {
    inline += n;
    if (inline > opts.maxInlineBytes) throw new SpoolError('inline_too_large', `the body's text outside its attachments exceeds ${opts.maxInlineBytes} bytes`);
  };
  const count = () => {
    values += 1;
    if (values > opts.maxValues) throw new SpoolError('too_many', `a JSON body may hold at most ${opts.maxValues} values`);
  };
  const path = (): (string | number)[] =>
    stack.map((f, i) => {
      if (f.kind === 'object') return f.key ?? '';
      return i === stack.length - 1 ? f.value.length : f.value.length - 1;
    });
  const place = (value: unknown) => {
    count();
    const top = stack[stack.length - 1];
    if (!top) {
      root = value;
      haveRoot = true;
    } else if (top.kind === 'array') top.value.push(value);
    else {
      // A repeated key keeps its last value, as JSON.parse does. The key stays until the next one: while a
      // container placed here is being read, it is this frame's part of the path.
      top.value[top.key!] = value;
    }
  };
  const open = (frame: Frame) => {
    place(frame.value);
    if (stack.length + 1 > opts.maxDepth) throw new SpoolError('too_deep', `JSON objects and arrays may nest at most ${opts.maxDepth} levels deep`);
    stack.push(frame);
  };

  function startSpool() {
    const out = new PassThrough({ highWaterMark: 64 * 1024 });
    const maxChars = opts.maxBytes;
    const entry: SpooledString = { key: '', length: 0, adopted: false };
    spooled.push(entry);
    const stored = opts.store(out, maxChars).then((key) => {
      entry.key = key;
    });
    // A store that fails stops reading: the sink is ended with its error, so a write waiting to drain is released.
    // Its failure is seen where it is awaited; until then it must not count as unhandled.
    stored.catch((err: Error) => out.destroy(err));
    pending.push(stored);
    const top = stack[stack.length - 1] as Extract<Frame, { kind: 'object' }>;
    // Not enumerable: the object reads as JSON.parse would have made it (validation, copies and equality ignore it).
    if (!top.value[SPOOLED]) Object.defineProperty(top.value, SPOOLED, { value: {}, enumerable: false });
    top.value[SPOOLED]![top.key!] = entry;
    sink = { out, chars: 0, entry, parts: [], held: 0 };
    place('');
  }

  async function handle(token: { name: string; value?: unknown }) {
    switch (token.name) {
      case 'startObject':
        open({ kind: 'object', value: {}, key: null });
        return;
      case 'startArray':
        open({ kind: 'array', value: [] });
        return;
      case 'endObject':
      case 'endArray':
        stack.pop();
        return;
      case 'startKey':
        piece = { kind: 'key', text: '' };
        return;
      case 'startString': {
        const top = stack[stack.length - 1];
        if (top?.kind === 'object' && opts.spill(path())) startSpool();
        else piece = { kind: 'string', text: '' };
        return;
      }
      case 'startNumber':
        piece = { kind: 'number', text: '' };
        return;
      case 'stringChunk':
      case 'numberChunk': {
        const text = token.value as string;
        if (sink) {
          sink.chars += text.length;
          // The tokenizer hands a string over 256 characters at a time; the store gets pieces of 64 KiB (a 256-byte
          // write each was one system call each, 5,500 for a 1 MiB file).
          sink.parts.push(text);
          sink.held += text.length;
          if (sink.held < SINK_PIECE) return;
          const piece = sink.parts.join('');
          sink.parts = [];
          sink.held = 0;
          if (!sink.out.write(piece)) await new Promise<void>((resolve, reject) => {
            const s = sink!.out;
            const done = () => {
              s.off('close', fail);
              resolve();
            };
            const fail = () => {
              s.off('drain', done);
              reject(s.errored ?? new Error('the store stopped reading'));
            };
            s.once('drain', done).once('close', fail);
          });
          return;
        }
        keep(text.length);
        piece!.text += text;
        return;
      }
      case 'endKey': {
        const top = stack[stack.length - 1] as Extract<Frame, { kind: 'object' }>;
        top.key = piece!.text;
        piece = null;
        return;
      }
      case 'endString':
        if (sink) {
          sink.entry.length = sink.chars;
          sink.out.end(sink.parts.join(''));
          sink = null;
          return;
        }
        place(piece!.text);
        piece = null;
        return;
      case 'endNumber':
        place(Number(piece!.text));
        piece = null;
        return;
      case 'nullValue':
      case 'trueValue':
      case 'falseValue':
        keep(5);
        place(token.value);
        return;
      default:
        return;
    }
  }

  async function feed(text: string, final: boolean) {
    let out;
    try {
      out = final ? (text ? [tokenize(text), tokenize(NONE)] : [tokenize(NONE)]) : [tokenize(text)];
    } catch (err) {
      throw new SpoolError('malformed', `the body is not valid JSON (${(err as Error).message.replace('Parser cannot parse input: ', '')})`);
    }
    for (const o of out) {
      const tokens = (o as { values?: { name: string; value?: unknown }[] })?.values;
      if (tokens) for (const t of tokens) await handle(t);
    }
  }

  try {
    for await (const chunk of source) {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
      bytes += buf.length;
      if (bytes > opts.maxBytes) throw new SpoolError('too_large', `the body exceeds ${opts.maxBytes} bytes`);
      await feed(decoder.write(buf), false);
    }
    await feed(decoder.end(), true);
    if (!haveRoot || stack.length > 0) throw new SpoolError('malformed', 'the body is not valid JSON (it ends early)');
    await Promise.all(pending);
    return { value: root, spooled };
  } catch (err) {
    (sink as { out: PassThrough } | null)?.out.destroy(err as Error);
    await Promise.allSettled(pending);
    await Promise.all(spooled.filter((s) => s.key).map((s) => opts.remove(s.key).catch(() => {})));
    throw err;
  }
}

// stream-chain's end-of-input mark (`none`): the tokenizer's flush, which ends a number at the end of the body.
const NONE = Symbol.for('object-stream.none') as unknown as string;
