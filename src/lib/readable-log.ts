/**
 * Readable logs for a person at a terminal (docs/operations.md, "Logs"): in development
 * (NODE_ENV unset or `development`) with stdout a TTY, src/server.ts builds the app with these
 * instead of JSON lines. One line per request, when it is answered (method, path with secret
 * query values redacted, status, milliseconds), none for the pages' static assets (stylesheets,
 * scripts, images, fonts: a page view's dozen requests), and every other log line as its time,
 * level and message with its fields. The lines are pino's own, parsed after its redaction and
 * its last pass over credentials (src/lib/logging.ts): nothing reaches the terminal that the JSON
 * line would not carry. Production, and any stdout that is not a terminal (a pipe, a file, a
 * log collector), keeps the JSON lines.
 */
import {
  LogController,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import { loggerOptions } from './logging.ts';
import { redactUrl } from './redact.ts';

/** When the readable lines replace the JSON ones. */
export function wantsReadableLogs(nodeEnv: string, stdout: { isTTY?: boolean }): boolean {
  return nodeEnv === 'development' && stdout.isTTY === true;
}

/** Content types of the pages' assets, whose requests get no line. */
const ASSET = /^(text\/css|text\/javascript|application\/javascript|image\/|font\/)/;

const LEVEL_NAMES: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: '',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};

/** Fields every pino line has, or that the readable line shows otherwise. */
const PLAIN = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'reqId', 'readable']);

const clock = (time: unknown) =>
  new Date(typeof time === 'number' ? time : Date.now()).toISOString().slice(11, 19);

function field(value: unknown): string {
  if (typeof value === 'string') return /[\s"=]/.test(value) ? JSON.stringify(value) : value;
  return JSON.stringify(value);
}

/** One JSON line of pino as a person reads it. */
function readableLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = LEVEL_NAMES[entry.level as number] ?? String(entry.level);
  const parts = [clock(entry.time)];
  if (level) parts.push(level);
  if (entry.readable === 'request') {
    const { method, url, status, ms } = entry as Record<string, string | number>;
    parts.push(`${method} ${url} ${status} ${ms} ms`);
    return `${parts.join(' ')}\n`;
  }
  parts.push(String(entry.msg ?? ''));
  let stack = '';
  for (const [key, value] of Object.entries(entry)) {
    if (PLAIN.has(key) || value === undefined) continue;
    if (key === 'err' && value && typeof value === 'object') {
      const err = value as { type?: string; message?: string; stack?: string };
      parts.push(`err=${field(`${err.type ?? 'Error'}: ${err.message ?? ''}`)}`);
      if ((entry.level as number) >= 50 && err.stack) stack = `\n${err.stack}`;
      continue;
    }
    parts.push(`${key}=${field(value)}`);
  }
  return `${parts.join(' ')}${stack}\n`;
}

/**
 * Fastify's request lines, readable: none when a request arrives, one when it is answered (its
 * method, path with secret query values redacted, status and milliseconds), unless it fetched an
 * asset. A request that failed is logged by Fastify as ever (its error, at error level).
 */
class ReadableRequestLines extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (this.isLogDisabled(request)) return;
    if (error) return super.requestCompleted(error, request, reply);
    if (ASSET.test(String(reply.getHeader('content-type') ?? ''))) return;
    request.log.info({
      readable: 'request',
      method: request.method,
      url: redactUrl(request.url),
      status: reply.statusCode,
      ms: Math.round(reply.elapsedTime * 10) / 10,
    });
  }
}

/** The server options of the readable logs: pino's lines (redacted as ever) to `out`. */
export function readableLoggerOptions(
  level: string,
  out: { write(text: string): unknown },
): Pick<FastifyServerOptions, 'logger' | 'logController'> {
  return {
    logger: {
      ...loggerOptions(level),
      stream: { write: (line: string) => out.write(readableLine(line)) },
    },
    logController: new ReadableRequestLines(),
  };
}
