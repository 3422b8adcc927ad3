import type { Span } from '@opentelemetry/api';
import type { PassType } from '../../core/domain.js';
import type { Page } from '../../upstream/types.js';
import {
  endSpan,
  inSpan,
  SPAN_ATTRIBUTES,
  withTraceparent,
  type PassTracer,
  type SpanOutcome,
} from '../../ops/tracing.js';
import type { PassSummary } from './types.js';

// The spans of a run, kept apart from the page logic so that tracing wraps its steps: a pass span, and under it a
// span per page (from its upstream request on) with its listing, diff, publish and commit steps. With tracing off
// there are no spans and every method does nothing.

/** The spans of one run (one pass). */
export class RunTrace {
  /** The pass's span (undefined when tracing is off): its pages' spans hang under it. */
  readonly span: Span | undefined;

  constructor(
    private readonly tracer: PassTracer,
    private readonly type: PassType,
    epoch: number,
    private readonly clock: () => number,
  ) {
    this.span = tracer.enabled ? tracer.startPass(type, { [SPAN_ATTRIBUTES.epoch]: epoch }) : undefined;
  }

  /** A step of the pass outside its pages (deletion detection): a child span, null when tracing is off. */
  step(name: string): Span | null {
    return this.span ? this.tracer.startChild(this.span, name) : null;
  }

  /** Ends the pass's span (once; later calls do nothing) with the run's totals. */
  end(summary: PassSummary, outcome: SpanOutcome, err?: unknown): void {
    const span = this.span;
    if (!span?.isRecording()) return;
    span.setAttribute(SPAN_ATTRIBUTES.pageReviews, summary.reviews);
    span.setAttribute(SPAN_ATTRIBUTES.events, summary.events);
    span.setAttribute('reviews_bridge.pages', summary.pages);
    endSpan(span, outcome, err);
  }

  /** Starts the span of a page, from its upstream request on, with its listing step. */
  page(page: Page): PageTrace {
    if (!this.span) return new PageTrace(this.tracer, undefined);
    const { tracer } = this;
    const sizes = {
      [SPAN_ATTRIBUTES.pageReviews]: page.reviews.length,
      [SPAN_ATTRIBUTES.pageRejects]: page.rejects.length,
    };
    const span = tracer.startChild(this.span, 'page', { [SPAN_ATTRIBUTES.pass]: this.type, ...sizes }, page.fetchedAt);
    const listing = tracer.startChild(span, 'listing', sizes, page.fetchedAt);
    endSpan(listing, 'ok', undefined, Math.max(page.fetchedAt, page.receivedAt ?? this.clock()));
    return new PageTrace(tracer, span);
  }
}

/** The span of one page; each method does nothing when tracing is off. */
export class PageTrace {
  constructor(
    private readonly tracer: PassTracer,
    /** The page's span: the parent of its publish and commit steps. */
    readonly span: Span | undefined,
  ) {}

  /** Runs the diff step in its span, which records the events and dead letters it found. */
  async diff<T>(work: () => Promise<T>, counts: (result: T) => { events: number; deadLetters: number }): Promise<T> {
    return inSpan(this.tracer, this.span, 'diff', async (span) => {
      const result = await work();
      if (span) {
        const { events, deadLetters } = counts(result);
        span.setAttribute(SPAN_ATTRIBUTES.events, events);
        span.setAttribute(SPAN_ATTRIBUTES.deadLetters, deadLetters);
      }
      return result;
    });
  }

  /** The events with the traceparent of this page, so a consumer can link to the page that produced them. */
  stamp<E extends object>(events: E[]): E[] {
    return withTraceparent(events, this.span);
  }

  /** Ends the span of a page that was committed, with what it amounted to. */
  committed(events: number, deadLetters: number, committed: boolean): void {
    if (!this.span) return;
    this.span.setAttribute(SPAN_ATTRIBUTES.events, events);
    this.span.setAttribute(SPAN_ATTRIBUTES.deadLetters, deadLetters);
    this.span.setAttribute('reviews_bridge.page.committed', committed);
    endSpan(this.span, 'ok');
  }

  /** Ends the span of a page that was published record by record. */
  ok(): void {
    if (this.span) endSpan(this.span, 'ok');
  }

  /** Ends the span of a page that failed. */
  failed(err: unknown): void {
    if (this.span) endSpan(this.span, 'error', err);
  }
}
