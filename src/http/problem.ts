import type { ServerResponse } from 'node:http';
import { types } from 'node:util';
import { AppError, dependencyUnavailable } from './errors';

/** Writes `err` as problem+json. Plain node:http, so the drain can answer outside Express too. */
export function sendProblem(res: ServerResponse, err: AppError, requestId: string): void {
  const body = JSON.stringify({
    type: 'about:blank',
    title: err.title,
    status: err.status,
    detail: err.detail,
    code: err.code,
    ...(err.extra.errors ? { errors: err.extra.errors } : {}),
    request_id: requestId,
  });
  for (const [name, value] of Object.entries(err.extra.headers ?? {})) res.setHeader(name, value);
  res.statusCode = err.status;
  res.setHeader('Content-Type', 'application/problem+json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

const PG_UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);

/**
 * Recognises a lost PostgreSQL or Redis so the caller gets a 503 with Retry-After instead of a 500.
 * Transactions roll back on these errors, so nothing is half-written.
 */
export function asDependencyError(err: unknown): AppError | null {
  // isNativeError also recognises errors made in another realm (Node's own, seen from a vm context such as jest's).
  if (!(err instanceof Error) && !types.isNativeError(err)) return null;
  const code = (err as { code?: unknown }).code;
  const message = err.message ?? '';
  if (typeof code === 'string' && (PG_UNAVAILABLE_CODES.has(code) || NET_CODES.has(code))) {
    return dependencyUnavailable('A backing service');
  }
  if (
    /timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error/i.test(message)
  ) {
    return dependencyUnavailable('PostgreSQL');
  }
  if (
    err.name === 'MaxRetriesPerRequestError' ||
    /Stream isn't writeable|Connection is closed|enableOfflineQueue/i.test(message)
  ) {
    return dependencyUnavailable('Redis');
  }
  return null;
}
