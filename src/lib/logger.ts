import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from '../config';

/**
 * Paths pino blanks before a line is written. Secrets must never reach a log line, whatever logs them:
 * credentials in headers, secrets in bodies, tokens and keys anywhere near the top of an object.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'authorization',
  'secret',
  'password',
  'token',
  '*.secret',
  '*.password',
  '*.token',
  '*.access_token',
  '*.refresh_token',
  '*.api_key',
  '*.signing_secret',
  '*.*.secret',
];

export function createLogger(config: Pick<Config, 'LOG_LEVEL' | 'NODE_ENV'>, destination?: DestinationStream): Logger {
  const options = {
    level: config.LOG_LEVEL,
    base: { service: 'helpdesk' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return destination ? pino(options, destination) : pino(options);
}
