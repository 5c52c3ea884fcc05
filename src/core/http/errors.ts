import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Socket } from 'node:net';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { isUnavailableError } from '../db/dialect.ts';
import { html, page, prefersHtml } from '../html.ts';
import { Problem, ServiceUnavailable, ValidationFailed, problemTypeUri, type FieldError, type ProblemSlug } from '../problems.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A page for people: failures are answered as HTML when the client accepts it. */
    page?: boolean;
  }
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';

/** Serialises a Problem as RFC 9457 problem+json, with the request id to quote to support. */
export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: Problem, baseUrl: string) {
  for (const [name, value] of Object.entries(problem.headers)) reply.header(name, value);
  reply.header('x-request-id', request.id);
  if (request.routeOptions.config?.page && prefersHtml(request)) return sendProblemPage(reply, problem);
  return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).serializer(JSON.stringify).send(problemDocument(request, problem, baseUrl));
}

/** The RFC 9457 document of a problem, as answered to this request. */
export function problemDocument(request: FastifyRequest, problem: Problem, baseUrl: string) {
  return {
    type: problemTypeUri(baseUrl, problem.slug),
    title: problem.title,
    status: problem.status,
    detail: problem.detail,
    instance: request.url.split('?')[0],
    requestId: request.id,
    ...problem.extensions,
  };
}

/** Pages people open from an e-mail or a link get the same problem as a readable page. */
function sendProblemPage(reply: FastifyReply, problem: Problem) {
  const body = html`<h1>${problem.title}</h1><p>${problem.detail}</p>`;
  return reply.code(problem.status).type('text/html; charset=utf-8').serializer(String).send(page(problem.title, body));
}

/** Maps anything thrown while handling a request to the Problem it should be answered with. */
export function toProblem(err: FastifyError | Error, bodyLimitBytes: number): Problem {
  if (err instanceof Problem) return err;
  if (hasZodFastifySchemaValidationErrors(err)) {
    const context = (err as { validationContext?: string }).validationContext ?? 'body';
    return new ValidationFailed(err.validation.map((issue) => fieldError(context, issue)));
  }
  const code = (err as FastifyError).code;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new Problem('payload-too-large', `The body exceeds the limit of ${bodyLimitBytes} bytes.`, {
        extensions: { limitBytes: bodyLimitBytes },
      });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new Problem('unsupported-media-type', 'This Content-Type is not accepted here; the API takes `application/json`.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new Problem('malformed-request', 'The body is empty although `Content-Type: application/json` was given.');
  }
  if (isUnavailableError(err)) return new ServiceUnavailable('The database cannot be reached right now.');
  const status = (err as FastifyError).statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new Problem('malformed-request', readableMessage(err));
  }
  return new Problem('internal-error', 'An unexpected error occurred.');
}

function fieldError(context: string, issue: { instancePath: string; message?: string }): FieldError {
  const path = issue.instancePath === '/' ? '' : issue.instancePath;
  return { pointer: `/${context}${path}`, message: issue.message ?? 'is invalid' };
}

/** Framework messages are written for developers and safe to show; keep them short. */
function readableMessage(err: Error): string {
  const message = err instanceof SyntaxError ? `The body is not valid JSON: ${err.message}` : err.message;
  return message.length > 300 ? `${message.slice(0, 297)}...` : message;
}

/**
 * Installs the error, not-found and framework-error answers on the app, and the answer to
 * requests that arrive while it closes. The app must be created with `return503OnClosing: false`:
 * Fastify's own answer then is plain JSON.
 */
export function installErrorHandling(app: FastifyInstance, baseUrl: string, bodyLimitBytes: number) {
  const outages = new OutageLog(app.log, OUTAGE_REPORT_EVERY_MS);
  app.addHook('onClose', async () => outages.close());
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const problem = toProblem(err, bodyLimitBytes);
    if (problem.status === 503) outages.record(request, problem, err);
    else if (problem.status >= 500) request.log.error({ err }, 'request failed');
    return sendProblem(request, reply, problem, baseUrl);
  });
  // A request on a keep-alive connection can arrive after shutdown began; the load balancer
  // sends its retry to another process (Fastify closes the connection after this answer).
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onRequest', (_request, _reply, done) => {
    done(closing ? new ServiceUnavailable('This process is shutting down; retry, and another will answer.', 1) : undefined);
  });
  // An answer finished while closing ends its connection: the client's next request then goes
  // to a new connection (refused here, taken by another process), not into one about to be cut.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });
  const methodsOf = routeMethods(app);
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = methodsOf(path);
    if (allowed.length > 0) {
      // The resource exists; only the method is wrong (RFC 9110 §15.5.6).
      const problem = new Problem('method-not-allowed', `${path} answers ${allowed.join(', ')}, not ${request.method}.`, { headers: { allow: allowed.join(', ') } });
      return sendProblem(request, reply, problem, baseUrl);
    }
    return sendProblem(request, reply, new Problem('not-found', `No route ${request.method} ${path}.`), baseUrl);
  });
}

/** How often an outage that goes on is reported. */
const OUTAGE_REPORT_EVERY_MS = 10_000;

/**
 * While a dependency is down every request fails the same way, thousands a second: a line with a
 * stack for each buries everything else and takes the CPU the recovery needs. The first 503 of
 * an outage is logged at warn with its cause; those that follow are counted, and the count is
 * logged once per interval while they go on and once more when the app closes. An interval
 * without any ends the outage; the next 503 is logged in full again.
 */
class OutageLog {
  private readonly open = new Map<ProblemSlug, { count: number; timer: NodeJS.Timeout }>();

  constructor(
    private readonly log: FastifyBaseLogger,
    private readonly everyMs: number,
  ) {}

  record(request: FastifyRequest, problem: Problem, err: Error): void {
    const outage = this.open.get(problem.slug);
    if (outage) {
      outage.count++;
      return;
    }
    request.log.warn(
      { err, problem: problem.slug, detail: problem.detail },
      `answering 503 ${problem.slug}; the next ones are counted and logged every ${this.everyMs / 1000} s`,
    );
    this.open.set(problem.slug, { count: 0, timer: this.schedule(problem.slug) });
  }

  close(): void {
    for (const [slug, outage] of this.open) {
      clearTimeout(outage.timer);
      this.report(slug, outage.count);
    }
    this.open.clear();
  }

  private schedule(slug: ProblemSlug): NodeJS.Timeout {
    const timer = setTimeout(() => {
      const outage = this.open.get(slug)!;
      if (outage.count === 0) {
        this.open.delete(slug);
        return;
      }
      this.report(slug, outage.count);
      outage.count = 0;
      outage.timer = this.schedule(slug);
    }, this.everyMs);
    // A report due is no reason to keep a process alive; close() logs what is left.
    timer.unref();
    return timer;
  }

  private report(slug: ProblemSlug, count: number): void {
    if (count === 0) return;
    this.log.warn({ problem: slug, count, seconds: this.everyMs / 1000 }, `${count} more requests answered 503 ${slug}`);
  }
}

/**
 * The methods each registered path answers, to tell "no such resource" (404) from "not with
 * this method" (405). Wildcard routes (CORS preflights) describe no resource and are left out.
 */
function routeMethods(app: FastifyInstance): (path: string) => string[] {
  const routes: Array<{ pattern: RegExp; methods: string[] }> = [];
  app.addHook('onRoute', (route) => {
    if (route.url.includes('*')) return;
    const segments = route.url.split('/').map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.+?^${}()|[\]\\]/g, '\\$&')));
    routes.push({ pattern: new RegExp(`^${segments.join('/')}$`), methods: [route.method].flat() });
  });
  return (path) => {
    const methods = new Set<string>();
    for (const route of routes) if (route.pattern.test(path)) for (const method of route.methods) methods.add(method);
    return [...methods].sort();
  };
}

/** Fastify's answers for errors found before routing (bad URL encoding and the like). */
export function frameworkErrors(baseUrl: string) {
  return (err: FastifyError, request: FastifyRequest, reply: FastifyReply) =>
    sendProblem(request, reply, new Problem('malformed-request', readableMessage(err)), baseUrl);
}

/** Malformed HTTP that never became a request: answer 400 problem+json on the raw socket. */
export function clientErrorHandler(baseUrl: string) {
  return (err: Error & { code?: string }, socket: Socket) => {
    if (!socket.writable) return;
    if (err.code === 'ECONNRESET') return socket.destroy();
    // Something was already answered on this connection (a 401 before its body arrived, say); a
    // further answer would be read as the reply to a request never sent. Node's own handler
    // draws the same line.
    if (socket.bytesWritten > 0) return socket.destroy();
    // HEADERS_TIMEOUT_MS or REQUEST_TIMEOUT_MS ran out before the request had arrived.
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      const problem = new Problem('request-timeout', 'The request did not arrive in time.');
      const body = JSON.stringify({ type: problemTypeUri(baseUrl, problem.slug), title: problem.title, status: problem.status, detail: problem.detail });
      return socket.end(`HTTP/1.1 408 Request Timeout\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    }
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : 400;
    const body = JSON.stringify({
      type: problemTypeUri(baseUrl, 'malformed-request'),
      title: tooLarge ? 'Request headers are too large' : 'The request could not be read',
      status,
      detail: 'The HTTP request is malformed.',
    });
    socket.end(
      `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
        `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  };
}
