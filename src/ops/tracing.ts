import {
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanStatusCode,
  isSpanContextValid,
  trace,
  type Attributes,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { errorKind } from './logger.js';

// The bridge's spans, kept to a few hooks: a pass span per pass (poll, sweep, initial load, resync, restore), a page
// span per page under it, and the page's steps (listing, diff, publish, commit) under that. Parents are passed by
// hand (the pipeline overlaps page N's commit with page N+1's read, so an implicit "current span" would mislead):
// no context manager is needed. Attributes are the account, the pass kind, sizes, counts and an outcome; never a
// review's content, an id of a person or a token. Without the SDK (src/app/tracing.ts) the tracer is the API's
// no-op one: every call below costs an object allocation and nothing is recorded or sent.

/** Attribute names of the bridge's spans. */
export const SPAN_ATTRIBUTES = {
  account: 'reviews_bridge.account',
  pass: 'reviews_bridge.pass',
  epoch: 'reviews_bridge.lease_epoch',
  pageReviews: 'reviews_bridge.page.reviews',
  pageRejects: 'reviews_bridge.page.rejects',
  events: 'reviews_bridge.events',
  deadLetters: 'reviews_bridge.dead_letters',
  outcome: 'reviews_bridge.outcome',
  error: 'error.type',
} as const;

/** How a span's work ended. */
export type SpanOutcome = 'ok' | 'error' | 'aborted' | 'abandoned';

// A tracer provider that never gets a delegate: its tracers are the API's no-op tracer whatever the process sets
// as its global provider.
const NOOP_TRACER: Tracer = new ProxyTracerProvider().getTracer('reviews-bridge');

/** The spans of one account's passes. */
export class PassTracer {
  constructor(
    private readonly tracer: Tracer,
    readonly account: string,
  ) {}

  /** Whether spans are recorded (the SDK is on): callers skip work that only feeds span attributes. */
  get enabled(): boolean {
    return this.tracer !== NOOP_TRACER;
  }

  /** Starts the span of a pass (a root span: every pass is its own trace). */
  startPass(kind: string, attributes: Attributes = {}): Span {
    return this.tracer.startSpan(`pass ${kind}`, {
      root: true,
      attributes: { [SPAN_ATTRIBUTES.account]: this.account, [SPAN_ATTRIBUTES.pass]: kind, ...attributes },
    });
  }

  /** Starts a span under `parent` (a page under its pass, a step under its page); `startTime` in ms since epoch. */
  startChild(parent: Span, name: string, attributes: Attributes = {}, startTime?: number): Span {
    const ctx = trace.setSpan(ROOT_CONTEXT, parent);
    return this.tracer.startSpan(
      name,
      { attributes: { [SPAN_ATTRIBUTES.account]: this.account, ...attributes }, startTime },
      ctx,
    );
  }
}

/** A tracer of the no-op kind, for tests and tools that trace nothing. */
export function noopPassTracer(account = 'default'): PassTracer {
  return new PassTracer(NOOP_TRACER, account);
}

/** Ends a span with its outcome; an error is named by its kind (class and code), never by its message. */
export function endSpan(span: Span, outcome: SpanOutcome, err?: unknown, endTime?: number): void {
  if (!span.isRecording()) return void span.end(endTime);
  span.setAttribute(SPAN_ATTRIBUTES.outcome, outcome);
  if (outcome === 'error') {
    const kind = err === undefined ? 'error' : errorKind(err);
    span.setAttribute(SPAN_ATTRIBUTES.error, kind);
    span.setStatus({ code: SpanStatusCode.ERROR, message: kind });
  }
  span.end(endTime);
}

/** Runs `work` in a child span of `parent` and ends it with the outcome. */
export async function inSpan<T>(
  tracer: PassTracer,
  parent: Span | undefined,
  name: string,
  work: (span: Span | undefined) => Promise<T>,
  attributes: Attributes = {},
): Promise<T> {
  if (!parent) return work(undefined);
  const span = tracer.startChild(parent, name, attributes);
  try {
    const result = await work(span);
    endSpan(span, 'ok');
    return result;
  } catch (err) {
    endSpan(span, 'error', err);
    throw err;
  }
}

/**
 * The W3C `traceparent` of a span (version 00): what an event carries so that a consumer can link to the page that
 * produced it. Undefined for the no-op tracer's spans, which have no valid context.
 */
export function traceparentOf(span: Span | undefined): string | undefined {
  const ctx = span?.spanContext();
  if (!ctx || !isSpanContextValid(ctx)) return undefined;
  const flags = (ctx.traceFlags & 0xff).toString(16).padStart(2, '0');
  return `00-${ctx.traceId}-${ctx.spanId}-${flags}`;
}

/**
 * The events with the W3C traceparent of `span` (CloudEvents distributed tracing): copies, so that ids,
 * fingerprints and the snapshot never see it. The events themselves without a valid span (tracing off).
 */
export function withTraceparent<E extends object>(events: E[], span: Span | null | undefined): E[] {
  const traceparent = traceparentOf(span ?? undefined);
  return traceparent ? events.map((event) => ({ ...event, traceparent })) : events;
}
