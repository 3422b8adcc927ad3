import { describe, expect, it } from 'vitest';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { PagePipeline } from '../../../src/bridge/pipeline.js';
import { TRACEPARENT_PATTERN } from '../../../src/core/events.js';
import { noopPassTracer, PassTracer, SPAN_ATTRIBUTES, traceparentOf } from '../../../src/ops/tracing.js';
import { FakeSink, FakeSnapshot, gate, page, review, silentLogger, testMetrics } from '../../helpers/fakes.js';

// The pipeline's spans on an in-memory exporter: the tree, the attributes, the traceparent the events carry, and
// that tracing changes nothing else of what is published (ids, order, content).

function setup(tracer?: PassTracer) {
  const log: string[] = [];
  const snapshot = new FakeSnapshot(log);
  const sink = new FakeSink(log);
  const pipeline = new PagePipeline({
    snapshot,
    sink,
    metrics: testMetrics(),
    logger: silentLogger,
    eventSource: 'urn:test',
    initialLoadMode: 'mark',
    tracer,
  });
  return { log, snapshot, sink, pipeline };
}

function traced() {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  return { exporter, tracer: new PassTracer(provider.getTracer('test'), 'acme') };
}

const parentOf = (s: ReadableSpan) => s.parentSpanContext?.spanId ?? '';

// Fixed fetch times: the snapshot entries of two runs are compared.
const FETCHED_AT = Date.now() - 60_000;

async function twoPages(pipeline: PagePipeline) {
  const run = pipeline.open('sweep', 3);
  await run.submit({ ...page([review(1), review(2)]), fetchedAt: FETCHED_AT });
  await run.submit({ ...page([review(3, { client_publication_status: 'REJECTED' })]), fetchedAt: FETCHED_AT });
  await run.commit({});
  run.end('ok');
}

describe('tracing of the page pipeline', () => {
  it('pass > page > listing, diff, publish, commit, with account, pass, sizes and outcome', async () => {
    const { exporter, tracer } = traced();
    const { pipeline } = setup(tracer);
    await twoPages(pipeline);
    const spans = exporter.getFinishedSpans();
    const pass = spans.find((s) => s.name === 'pass sweep')!;
    expect(parentOf(pass)).toBe('');
    expect(pass.attributes).toMatchObject({
      [SPAN_ATTRIBUTES.account]: 'acme',
      [SPAN_ATTRIBUTES.pass]: 'sweep',
      [SPAN_ATTRIBUTES.epoch]: 3,
      [SPAN_ATTRIBUTES.outcome]: 'ok',
      [SPAN_ATTRIBUTES.events]: 3,
    });
    const pages = spans.filter((s) => s.name === 'page');
    expect(pages).toHaveLength(2);
    expect(pages.map((p) => p.attributes[SPAN_ATTRIBUTES.pageReviews])).toEqual([2, 1]);
    for (const p of pages) {
      expect(parentOf(p)).toBe(pass.spanContext().spanId);
      expect(p.attributes).toMatchObject({ [SPAN_ATTRIBUTES.outcome]: 'ok', [SPAN_ATTRIBUTES.pass]: 'sweep' });
      const steps = spans.filter((s) => parentOf(s) === p.spanContext().spanId).map((s) => s.name);
      expect(steps.sort()).toEqual(['commit', 'diff', 'listing', 'publish']);
    }
  });

  it("stamps each event with its page span's traceparent, and nothing else changes", async () => {
    const { tracer } = traced();
    const plain = setup();
    const withTrace = setup(tracer);
    await twoPages(plain.pipeline);
    await twoPages(withTrace.pipeline);
    const stamped = withTrace.sink.events;
    expect(stamped.every((e) => TRACEPARENT_PATTERN.test(e.traceparent ?? ''))).toBe(true);
    // Events of one page share their page's traceparent; the two pages differ.
    expect(new Set(stamped.map((e) => e.traceparent)).size).toBe(2);
    expect(stamped.map(({ traceparent: _, ...rest }) => rest)).toEqual(plain.sink.events);
    expect(plain.sink.events.every((e) => !('traceparent' in e))).toBe(true);
    // The snapshot (fingerprints, sequences) does not see it either.
    expect([...withTrace.snapshot.entries]).toEqual([...plain.snapshot.entries]);
  });

  it('a failed page ends its span with the error kind, never the message', async () => {
    const { exporter, tracer } = traced();
    const { sink, pipeline } = setup(tracer);
    const held = gate();
    sink.gates.push(held);
    const run = pipeline.open('incremental', 1);
    await run.submit(page([review(1)]));
    held.fail(new TypeError('review 1 of someone@example.com'));
    await expect(run.commit({})).rejects.toThrow();
    run.end('error', new TypeError('someone@example.com'));
    const spans = exporter.getFinishedSpans();
    const failed = spans.filter((s) => s.attributes[SPAN_ATTRIBUTES.outcome] === 'error').map((s) => s.name);
    expect(failed.sort()).toEqual(['page', 'pass incremental', 'publish']);
    expect(JSON.stringify(spans.map((s) => [s.attributes, s.status]))).not.toContain('example.com');
    expect(spans.find((s) => s.name === 'page')!.attributes[SPAN_ATTRIBUTES.error]).toBe('TypeError');
  });

  it('off (the no-op tracer): no span, no traceparent', async () => {
    const noop = noopPassTracer();
    expect(noop.enabled).toBe(false);
    const { sink, pipeline } = setup(noop);
    await twoPages(pipeline);
    expect(sink.events.every((e) => e.traceparent === undefined)).toBe(true);
    expect(traceparentOf(noop.startPass('sweep'))).toBeUndefined();
  });
});
