import { afterEach, describe, expect, it } from 'vitest';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { startExampleConsumer } from '../../examples/consumer.js';
import { TRACEPARENT_PATTERN, type ReviewEvent } from '../../src/core/events.js';
import { SPAN_ATTRIBUTES } from '../../src/ops/tracing.js';
import {
  eventually,
  initialLoadDone,
  simulatorForTest,
  startTestBridge,
  sweepNow,
  testEnv,
} from '../helpers/bridge.js';
import { readAll, type ReadMessage } from '../helpers/kafka.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { schemaErrors } from '../helpers/schemas.js';
import { kafkaBrokers, uniqueName } from '../helpers/services.js';

// OpenTelemetry end to end: the bridge (tracing on through the standard OTEL_* variables) sends its spans to an
// in-process OTLP/HTTP receiver; the events read back by a real read_committed consumer carry the traceparent of a
// page span the receiver got, and the example consumer's span links to it.

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

async function receiver(): Promise<OtlpReceiver> {
  const r = await startOtlpReceiver();
  cleanups.push(() => r.close());
  return r;
}

function childrenOf(spans: ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] {
  return spans.filter((s) => s.parentSpanId === parent.spanId && s.traceId === parent.traceId);
}

/** The span id and trace id a traceparent names. */
function named(traceparent: string): { traceId: string; spanId: string } {
  const [, traceId, spanId] = traceparent.split('-') as [string, string, string];
  return { traceId, spanId };
}

/** The traceparent of a consumed event: the header and the envelope attribute, which must agree. */
function traceparentOfMessage(m: ReadMessage): string {
  const event = JSON.parse(m.value) as ReviewEvent;
  expect(schemaErrors(event)).toEqual([]);
  expect(event.traceparent).toMatch(TRACEPARENT_PATTERN);
  expect(m.headers.traceparent).toBe(event.traceparent);
  return event.traceparent!;
}

describe('OpenTelemetry traces', () => {
  it('pass > page > listing/diff/publish/commit reach an OTLP receiver, and events name their page span', async () => {
    const otlp = await receiver();
    const sim = await simulatorForTest({ reviewCount: 150, seed: 21 });
    const env = testEnv(sim.url, {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      // Spans are exported only at shutdown here (the batch never fills): the flush on stop is part of the check.
      OTEL_BSP_SCHEDULE_DELAY: '600000',
    });
    const b = await startTestBridge(env);
    cleanups.push(() => b.stop());
    await initialLoadDone(b);

    // The example consumer, traced by its own SDK into the same receiver.
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ 'service.name': 'reviews-feed-example' }),
      spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter({ url: `${otlp.url}/v1/traces` }) })],
    });
    cleanups.push(() => provider.shutdown());
    const consumer = await startExampleConsumer({
      brokers: kafkaBrokers(),
      groupId: uniqueName('traced-consumer'),
      topics: b.topics,
      tracer: provider.getTracer('reviews-feed-example'),
      onRejected: () => undefined,
      onForeign: (e) => {
        throw e;
      },
    });
    cleanups.push(() => consumer.stop());

    const target = Array.from({ length: 150 }, (_, i) => i + 1).find(
      (id) => sim.control.get(id)?.client_publication_status !== 'REJECTED',
    )!;
    sim.control.setStatus(target, { client: 'REJECTED' });
    const changed = await readAll([b.topics.statusChanged], { untilCount: 1, timeoutMs: 30_000 });
    const created = await readAll([b.topics.created], { untilCount: 150, timeoutMs: 30_000 });
    await eventually(
      async () =>
        consumer.feed.reviews.get(target)?.review?.client_publication_status === 'REJECTED' ? true : undefined,
      30_000,
      'the example consumer to see the change',
    );
    // A review removed upstream: the sweep's deletions step reports it, under the sweep's pass span.
    const removed = target === 150 ? 149 : 150;
    sim.control.removeReview(removed);
    await sweepNow(b);
    const deleted = await readAll([b.topics.deleted], { untilCount: 1, timeoutMs: 30_000 });
    await provider.forceFlush();
    await b.stop();

    expect(otlp.refused).toEqual([]);
    const bridgeSpans = otlp.spans.filter((s) => s.service === 'reviews-bridge');
    const byId = new Map(bridgeSpans.map((s) => [s.spanId, s]));

    // The status change: its event names a page span of an incremental poll, with the four steps under it.
    const statusTp = traceparentOfMessage(changed[0]!);
    const page = byId.get(named(statusTp).spanId);
    expect(page, 'the page span the event names').toBeDefined();
    expect(page!.traceId).toBe(named(statusTp).traceId);
    expect(page!.name).toBe('page');
    expect(page!.attributes).toMatchObject({
      [SPAN_ATTRIBUTES.account]: env.BRIDGE_ACCOUNT,
      [SPAN_ATTRIBUTES.pass]: 'incremental',
      [SPAN_ATTRIBUTES.outcome]: 'ok',
      [SPAN_ATTRIBUTES.events]: 1,
    });
    expect(page!.attributes[SPAN_ATTRIBUTES.pageReviews]).toBeGreaterThanOrEqual(1);
    const pass = byId.get(page!.parentSpanId)!;
    expect(pass).toMatchObject({ name: 'pass incremental', parentSpanId: '' });
    expect(pass.attributes).toMatchObject({
      [SPAN_ATTRIBUTES.account]: env.BRIDGE_ACCOUNT,
      [SPAN_ATTRIBUTES.pass]: 'incremental',
      [SPAN_ATTRIBUTES.outcome]: 'ok',
    });
    const steps = childrenOf(bridgeSpans, page!);
    expect(steps.map((s) => s.name).sort()).toEqual(['commit', 'diff', 'listing', 'publish']);
    for (const step of steps) {
      expect(step.startMs).toBeGreaterThanOrEqual(page!.startMs);
      expect(step.endMs).toBeLessThanOrEqual(page!.endMs + 1);
    }

    // The initial load: one pass span, its pages (150 reviews: two pages of at most 100), each with its steps, and
    // every created event names one of them.
    const initial = bridgeSpans.filter((s) => s.name === 'pass initial');
    expect(initial).toHaveLength(1);
    expect(initial[0]!.attributes).toMatchObject({
      [SPAN_ATTRIBUTES.outcome]: 'ok',
      [SPAN_ATTRIBUTES.pass]: 'initial',
    });
    const initialPages = childrenOf(bridgeSpans, initial[0]!).filter((s) => s.name === 'page');
    expect(initialPages.length).toBeGreaterThanOrEqual(2);
    for (const p of initialPages) {
      const names = childrenOf(bridgeSpans, p).map((s) => s.name);
      expect(names.sort()).toEqual(['commit', 'diff', 'listing', 'publish']);
    }
    const pageIds = new Set(initialPages.map((p) => p.spanId));
    const createdPages = created.map((m) => named(traceparentOfMessage(m)));
    expect(createdPages.every((id) => pageIds.has(id.spanId) && id.traceId === initial[0]!.traceId)).toBe(true);

    // review.deleted names the deletions span of the sweep that found it.
    expect(deleted.map((m) => (JSON.parse(m.value) as { subject: string }).subject)).toEqual([String(removed)]);
    const deletions = byId.get(named(traceparentOfMessage(deleted[0]!)).spanId)!;
    expect(deletions).toMatchObject({ name: 'deletions' });
    expect(deletions.attributes).toMatchObject({ 'reviews_bridge.deleted': 1, [SPAN_ATTRIBUTES.outcome]: 'ok' });
    expect(byId.get(deletions.parentSpanId)).toMatchObject({ name: 'pass sweep', parentSpanId: '' });

    // The example consumer's span of that event links to the page span the bridge sent.
    const consumed = otlp.spans.filter(
      (s) => s.service === 'reviews-feed-example' && s.name === 'consume review.status_changed',
    );
    expect(consumed.length).toBeGreaterThanOrEqual(1);
    const links = consumed.flatMap((s) => s.links);
    expect(links).toContainEqual({ traceId: page!.traceId, spanId: page!.spanId });

    // No personal data and no secret in anything sent: no e-mail address, name or text of a review, no credential.
    const sent = otlp.bodies.join('\n');
    expect(sent).not.toMatch(/@|demo-secret|Bearer/);
    for (const id of [1, 2, 3, target]) {
      const review = sim.control.get(id)! as Record<string, unknown>;
      for (const field of ['nickname', 'headline', 'comments', 'email', 'location']) {
        const value = review[field];
        if (typeof value === 'string' && value.length >= 4) expect(sent).not.toContain(JSON.stringify(value));
      }
    }
  }, 120_000);

  it('OTEL_SDK_DISABLED=true wins over an endpoint: no traceparent in events, nothing sent', async () => {
    const otlp = await receiver();
    const sim = await simulatorForTest({ reviewCount: 20, seed: 22 });
    const env = testEnv(sim.url, {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_SDK_DISABLED: 'true',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    const b = await startTestBridge(env);
    cleanups.push(() => b.stop());
    await initialLoadDone(b);
    const created = await readAll([b.topics.created], { untilCount: 20, timeoutMs: 30_000 });
    for (const m of created) {
      expect(m.headers.traceparent).toBeUndefined();
      expect(JSON.parse(m.value)).not.toHaveProperty('traceparent');
    }
    await b.stop();
    expect(otlp.bodies).toEqual([]);
  }, 60_000);
});
