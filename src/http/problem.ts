import type { ServerResponse } from 'node:http';
import type { DomainError } from '../lib/errors';
import { AppError, toProblem } from './errors';

/** Writes `err` as problem+json. Plain node:http, so the drain can answer outside Express too. */
export function sendProblem(res: ServerResponse, refusal: AppError | DomainError, requestId: string): void {
  const err = refusal instanceof AppError ? refusal : toProblem(refusal);
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

