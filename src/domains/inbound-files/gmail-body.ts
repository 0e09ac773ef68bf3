import { Transform, type TransformCallback } from 'node:stream';
import { FetchFailed } from './download';

/**
 * Gmail's `users.messages.attachments.get` answers a MessagePartBody, `{"size": n, "data": "<base64url>"}` (an
 * `attachmentId` may be there too), with the whole file inside one JSON string. Parsing it with JSON.parse would
 * hold the answer text (4/3 of the file), its string and the decoded bytes at once, per download. This Transform
 * reads the answer as it arrives instead: a small state machine walks the top-level object, skips every other
 * member, and decodes the `data` string's base64url to bytes chunk by chunk. What it holds at any time is one
 * network chunk plus a base64 quantum (at most 3 characters); the bytes go on to the file store as they come.
 *
 * It validates as it goes: the answer must be one object, `data` a string of base64url characters only (a
 * backslash, that is an escape, is refused: base64url never needs one), `size` a non-negative integer that, when
 * present, equals the bytes decoded, and the members other than `data` at most 64 KiB in all.
 */

/** Bytes of the answer outside `data` (the other members, whitespace): MessagePartBody has two short ones. */
const MAX_OTHER_BYTES = 64 * 1024;
/** Longest member name read (longer ones are skipped unread: none of them is one we want). */
const MAX_KEY = 64;
/** Longest `size` literal read (a 64-bit integer has 20 digits). */
const MAX_NUMBER = 24;
const WS = ' \t\r\n';
/** base64url (RFC 4648 §5) and its optional padding: anything else in `data` fails the file. */
const NOT_BASE64URL = /[^A-Za-z0-9_=-]/;

type State = 'start' | 'key?' | 'key' | 'colon' | 'value' | 'data' | 'skip' | 'next' | 'end';

const bad = (why: string) => new FetchFailed(`Gmail's attachment answer is not a MessagePartBody (${why})`);

export function gmailAttachmentBody(): Transform {
  let state: State = 'start';
  let key = '';
  let keyEscape = false;
  // Skipping a member's value: nesting depth, inside a string, after a backslash.
  let depth = 0;
  let inString = false;
  let escape = false;
  let literal = '';
  let other = 0;
  let sawData = false;
  let declared: number | undefined;
  let rest = '';
  let decoded = 0;

  /** base64url text → bytes, carrying a partial quantum to the next call. */
  function decode(text: string, push: (b: Buffer) => void, last: boolean): void {
    if (NOT_BASE64URL.test(text)) throw bad('`data` holds characters outside base64url');
    const all = rest + text;
    const whole = last ? all.length : all.length - (all.length % 4);
    rest = all.slice(whole);
    if (whole === 0) return;
    const bytes = Buffer.from(all.slice(0, whole), 'base64url');
    decoded += bytes.length;
    push(bytes);
  }

  /** The end of a skipped primitive value: a `size` literal is kept. */
  function endPrimitive(): void {
    if (key === 'size') {
      const t = literal.trim();
      if (t === '' || t.length > 20 || [...t].some((c) => c < '0' || c > '9')) throw bad('`size` is not a non-negative integer');
      declared = Number(t);
    }
    literal = '';
  }

  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      try {
        const s = chunk.toString('latin1');
        let i = 0;
        while (i < s.length) {
          if (state === 'data') {
            // The fast path: the file's text up to its closing quote, in one slice.
            const q = s.indexOf('"', i);
            const end = q === -1 ? s.length : q;
            if (end > i) decode(s.slice(i, end), (b) => this.push(b), false);
            if (q === -1) return done();
            decode('', (b) => this.push(b), true);
            state = 'next';
            i = q + 1;
            continue;
          }
          const c = s[i]!;
          i += 1;
          other += 1;
          if (other > MAX_OTHER_BYTES) throw bad(`more than ${MAX_OTHER_BYTES} bytes besides the data`);
          switch (state) {
            case 'start':
              if (WS.includes(c)) break;
              if (c !== '{') throw bad('not a JSON object');
              state = 'key?';
              break;
            case 'key?':
              if (WS.includes(c) || c === ',') break;
              if (c === '}') {
                state = 'end';
                break;
              }
              if (c !== '"') throw bad('a member without a name');
              key = '';
              keyEscape = false;
              state = 'key';
              break;
            case 'key':
              if (keyEscape) keyEscape = false;
              else if (c === '\\') keyEscape = true;
              else if (c === '"') {
                state = 'colon';
                break;
              }
              if (key.length <= MAX_KEY) key += c;
              break;
            case 'colon':
              if (WS.includes(c)) break;
              if (c !== ':') throw bad('a member name without a colon');
              state = 'value';
              break;
            case 'value':
              if (WS.includes(c)) break;
              if (key === 'data') {
                if (c !== '"') throw bad('`data` is not a string');
                if (sawData) throw bad('`data` given twice');
                sawData = true;
                state = 'data';
                break;
              }
              depth = 0;
              inString = false;
              escape = false;
              literal = '';
              state = 'skip';
              i -= 1;
              other -= 1;
              break;
            case 'skip':
              if (inString) {
                if (escape) escape = false;
                else if (c === '\\') escape = true;
                else if (c === '"') inString = false;
                break;
              }
              if (c === '"') {
                if (key === 'size' && depth === 0) throw bad('`size` is not a non-negative integer');
                inString = true;
              } else if (c === '{' || c === '[') {
                if (key === 'size') throw bad('`size` is not a non-negative integer');
                depth += 1;
              } else if ((c === '}' || c === ']') && depth > 0) depth -= 1;
              else if (depth === 0 && (c === ',' || c === '}')) {
                endPrimitive();
                state = c === ',' ? 'key?' : 'end';
              } else if (depth === 0 && literal.length <= MAX_NUMBER) literal += c;
              break;
            case 'next':
              if (WS.includes(c)) break;
              if (c === ',') state = 'key?';
              else if (c === '}') state = 'end';
              else throw bad('something after `data` that is not a comma or the end');
              break;
            case 'end':
              if (!WS.includes(c)) throw bad('something after the object');
              break;
          }
        }
        done();
      } catch (err) {
        done(err as Error);
      }
    },
    flush(done: TransformCallback) {
      if (state !== 'end') return done(bad('the answer ended before the object did'));
      if (!sawData) return done(bad('no `data`'));
      if (declared !== undefined && declared !== decoded) return done(new FetchFailed(`Gmail declared ${declared} bytes for the attachment and sent ${decoded}`));
      done();
    },
  });
}
