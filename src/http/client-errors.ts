import { STATUS_CODES, type Server } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Requests node:http refuses before any handler runs (a request line or headers over its limit, a
 * malformed request) still get a problem+json answer with a stable code, like every other refusal.
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'HPE_REQUEST_TIMEOUT' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const code = status === 431 ? 'request_header_too_large' : status === 408 ? 'request_timeout' : 'malformed_request';
    const detail = status === 431 ? 'The request line or headers exceed the size limit (16 KiB).' : status === 408 ? 'The request took too long to arrive.' : 'The request could not be parsed as HTTP.';
    const body = JSON.stringify({ type: 'about:blank', title: STATUS_CODES[status], status, detail, code });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}
