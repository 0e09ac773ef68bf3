import busboy from 'busboy';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { DomainError, refuse, validationFailed } from '../../lib/errors';

/**
 * Reads a multipart/form-data upload as it arrives (busboy): answers the part named `file` as a stream the
 * moment its headers are read, before any of its bytes, so they go on to the blob store without being held.
 * Other parts are read past and thrown away; the whole request is bounded (`maxRequestBytes`), so a body of
 * other parts cannot run on forever. Nothing here buffers more than busboy's own chunk.
 */

/** Room for the form's boundaries, part headers and small fields beside the file. */
export const MULTIPART_OVERHEAD_BYTES = 64 * 1024;

export interface FilePart {
  /** The name as the client sent it (not yet sanitised). */
  name: string;
  declaredType: string;
  body: Readable;
  /** Settles when the whole form has been read (the parts after the file included), or fails with its error. */
  finished: Promise<void>;
  /** Stops reading the request (a refused file: nothing more of it is wanted). */
  abort(): void;
}

const tooLarge = (maxFileBytes: number) =>
  refuse('file_too_large', `The file is larger than ${maxFileBytes} bytes (FILES_MAX_BYTES), the most one file may be; nothing was stored.`);

export function readFilePart(input: { body: Readable; headers: IncomingHttpHeaders }, opts: { field: string; maxFileBytes: number }): Promise<FilePart> {
  const type = String(input.headers['content-type'] ?? '').toLowerCase();
  if (!type.startsWith('multipart/form-data')) {
    return Promise.reject(refuse('unsupported_media_type', `Send the file as multipart/form-data, in the part named ${opts.field}.`));
  }
  const maxRequestBytes = opts.maxFileBytes + MULTIPART_OVERHEAD_BYTES;
  const declared = Number(input.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxRequestBytes) return Promise.reject(tooLarge(opts.maxFileBytes));

  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: input.headers,
      defParamCharset: 'utf8',
      limits: { files: 4, fields: 20, fieldNameSize: 100, fieldSize: 1024, parts: 32, headerPairs: 20 },
    });
  } catch (err) {
    return Promise.reject(validationFailed([{ path: 'body', message: (err as Error).message.slice(0, 200) }], 'The body is not a readable multipart/form-data form.'));
  }

  return new Promise<FilePart>((resolve, reject) => {
    let part: FilePart | undefined;
    let current: Readable | undefined;
    let read = 0;
    let settleFinished: { resolve: () => void; reject: (err: Error) => void } | undefined;
    const finished = new Promise<void>((res, rej) => (settleFinished = { resolve: res, reject: rej }));
    // Nobody may be listening yet (a refused file): an unheard rejection must not crash the process.
    finished.catch(() => {});

    const stop = () => {
      input.body.unpipe(parser);
      input.body.off('data', count);
    };
    const fail = (err: Error) => {
      stop();
      current?.destroy(err);
      settleFinished?.reject(err);
      if (!part) reject(err);
    };
    function count(chunk: Buffer) {
      read += chunk.length;
      if (read > maxRequestBytes) fail(tooLarge(opts.maxFileBytes));
    }

    parser.on('file', (field, stream, info) => {
      if (field !== opts.field || part) {
        stream.resume();
        return;
      }
      current = stream;
      part = {
        name: info.filename ?? '',
        declaredType: info.mimeType,
        body: stream,
        finished,
        abort: stop,
      };
      resolve(part);
    });
    parser.on('close', () => {
      stop();
      settleFinished?.resolve();
      if (!part) reject(validationFailed([{ path: `body.${opts.field}`, message: 'required: the file, as a part of this name' }], `The form has no part named ${opts.field}.`));
    });
    parser.on('error', (err: unknown) => {
      const e = err instanceof DomainError ? err : validationFailed([{ path: 'body', message: String((err as Error)?.message ?? err).slice(0, 200) }], 'The body is not a readable multipart/form-data form.');
      fail(e);
    });
    input.body.on('data', count);
    input.body.on('error', (err) => fail(err));
    // A client that goes away mid-upload: the request closes without its end, and the part must not wait forever.
    input.body.on('close', () => {
      if ((input.body as { complete?: boolean }).complete === false) fail(validationFailed([{ path: 'body', message: 'the request ended before the form was whole' }], 'The upload ended before the file was whole.'));
    });
    input.body.pipe(parser);
  });
}
