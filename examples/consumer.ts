// An example consumer of the review feed (kafkajs, a real consumer group). It
//   1. notes where the change topics end, then bootstraps its view from the compacted state topic;
//   2. follows the change topics from those offsets (or from its group's committed offsets after a restart);
//   3. deduplicates and orders with the kit's reducer (by event id and per-review sequence), so redeliveries and
//      cross-topic reordering do not matter;
//   4. reacts to transitions to REJECTED (here: a callback, by default a log line);
//   5. with OpenTelemetry on (the bridge's OTEL_* variables), handles each change event in a span of its own that
//      links to the bridge's page span named by the event's traceparent: the trace of the poll that found it.
// Run it: KAFKA_BROKERS=127.0.0.1:9092 npx tsx examples/consumer.ts   (topics: the bridge's defaults, or the
// KAFKA_TOPIC_* variables the bridge uses). In another service, import from 'reviews-bridge' instead of '../src'.
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { Kafka, logLevel, type Admin, type KafkaConfig } from 'kafkajs';
import { SpanKind, TraceFlags, type Link, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import {
  FeedView,
  ForeignMessageError,
  parseReviewEvent,
  traceparentOf,
  type KafkaRecordLike,
  type ParsedRecord,
  type RejectedTransition,
  type ReviewView,
} from '../src/index.js';

/** The bridge's topics the consumer reads. */
export interface FeedTopics {
  state: string;
  created: string;
  statusChanged: string;
  updated: string;
  deleted: string;
  heartbeat: string;
}

/** Options of the example consumer. */
export interface ExampleConsumerOptions {
  brokers: string[];
  /** Consumer group of the change topics (its committed offsets survive restarts). */
  groupId: string;
  topics: FeedTopics;
  /** Called once per transition of a known review to REJECTED. */
  onRejected?: (transition: RejectedTransition, view: ReviewView) => void;
  /** Called for records that are not the bridge's (logged and skipped: a foreign record must not stop the feed). */
  onForeign?: (error: ForeignMessageError, topic: string) => void;
  kafka?: Partial<KafkaConfig>;
  /** With a tracer, every followed change event is handled in a span linked to the bridge's page span. */
  tracer?: Tracer;
}

/** A running example consumer. */
export interface ExampleConsumer {
  /** The view: current state of every review, plus the last heartbeat. */
  feed: FeedView;
  /** How many state rows the bootstrap applied. */
  bootstrapped: number;
  stop(): Promise<void>;
}

type Offsets = Map<string, Array<{ partition: number; offset: string }>>;

async function endOffsets(admin: Admin, topics: string[]): Promise<Offsets> {
  const out: Offsets = new Map();
  for (const topic of topics) {
    const offsets = await admin.fetchTopicOffsets(topic);
    out.set(
      topic,
      offsets.map((o) => ({ partition: o.partition, offset: o.high })),
    );
  }
  return out;
}

/** Reads the state topic from the beginning to the end offsets taken now, applying every row to the view. */
async function bootstrap(kafka: Kafka, admin: Admin, topic: string, handle: Handler) {
  const ends = (await endOffsets(admin, [topic])).get(topic)!;
  const remaining = new Map(ends.filter((e) => e.offset !== '0').map((e) => [e.partition, BigInt(e.offset)]));
  if (remaining.size === 0) return 0;
  let rows = 0;
  // A throwaway group: the bootstrap reads everything every time and commits nothing that matters.
  const reader = kafka.consumer({ groupId: `bootstrap-${randomUUID()}`, maxWaitTimeInMs: 200 });
  await reader.connect();
  try {
    await reader.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      reader.on(reader.events.CRASH, ({ payload }) => {
        if (!payload.restart) reject(payload.error);
      });
      void reader
        .run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            for (const message of batch.messages) {
              handle(message, topic);
              rows++;
            }
            const end = remaining.get(batch.partition);
            if (end !== undefined && BigInt(batch.lastOffset()) + 1n >= end) remaining.delete(batch.partition);
            if (remaining.size === 0) resolve();
          },
        })
        .catch(reject);
    });
  } finally {
    await reader.disconnect();
  }
  return rows;
}

/** Handles one Kafka message of a topic. */
type Handler = (message: KafkaRecordLike, topic: string) => void;

/** Starts the consumer: bootstraps from the state topic, then follows the change topics. */
export async function startExampleConsumer(options: ExampleConsumerOptions): Promise<ExampleConsumer> {
  const kafka = new Kafka({
    clientId: 'reviews-feed-example',
    brokers: options.brokers,
    logLevel: logLevel.WARN,
    ...options.kafka,
  });
  const feed = new FeedView();
  const onForeign =
    options.onForeign ?? ((error, topic) => console.warn(`skipped a record of ${topic}: ${error.message}`));
  const onRejected =
    options.onRejected ?? ((t) => console.log(`review ${t.reviewId} rejected (${t.field}, was ${t.from})`));
  // Parse, apply to the view (the reducer drops duplicates and stale records), react to REJECTED transitions.
  let bootstrapping = true;
  const handle: Handler = (message, topic) => {
    let record: ParsedRecord;
    try {
      record = parseReviewEvent(message);
    } catch (error) {
      if (!(error instanceof ForeignMessageError)) throw error;
      onForeign(error, topic);
      return;
    }
    // A span of the consumer's own trace, linked to (not a child of) the bridge's page: the page's trace ends at
    // its commit, and one page's events are handled at different times, by different consumers.
    const span =
      options.tracer && !bootstrapping && 'event' in record
        ? options.tracer.startSpan(`consume ${record.event.type}`, {
            kind: SpanKind.CONSUMER,
            root: true,
            links: linkTo(traceparentOf(message, record)),
            attributes: { 'messaging.system': 'kafka', 'messaging.destination.name': topic },
          })
        : undefined;
    try {
      const result = feed.apply(record);
      // The state topic may still hold a review's older rows (compaction is lazy): transitions replayed while
      // bootstrapping are history, not news, so only the followed change topics trigger reactions.
      if (!bootstrapping) for (const transition of result.effects) onRejected(transition, result.view!);
    } finally {
      span?.end();
    }
  };

  const { topics } = options;
  const changeTopics = [topics.created, topics.statusChanged, topics.updated, topics.deleted, topics.heartbeat];
  const admin = kafka.admin();
  await admin.connect();
  let bootstrapped: number;
  let startAt: Offsets;
  let committed: boolean;
  try {
    // 1. Where the change topics end *before* the state topic is read: everything after these offsets is
    //    applied again after the bootstrap (harmless: the reducer ignores what it already has).
    startAt = await endOffsets(admin, changeTopics);
    bootstrapped = await bootstrap(kafka, admin, topics.state, handle);
    bootstrapping = false;
    const groupOffsets = await admin.fetchOffsets({ groupId: options.groupId, topics: changeTopics });
    committed = groupOffsets.some((t) => t.partitions.some((p) => p.offset !== '-1'));
  } finally {
    await admin.disconnect();
  }

  // 2. Follow the change topics with the consumer group.
  const consumer = kafka.consumer({ groupId: options.groupId, maxWaitTimeInMs: 500 });
  await consumer.connect();
  for (const topic of changeTopics) await consumer.subscribe({ topic, fromBeginning: false });
  await consumer.run({
    eachMessage: async ({ topic, message }) => {
      handle(message, topic);
    },
  });
  // A group without committed offsets starts where the change topics ended before the bootstrap.
  if (!committed) {
    for (const [topic, partitions] of startAt) {
      for (const { partition, offset } of partitions) consumer.seek({ topic, partition, offset });
    }
  }
  return {
    feed,
    bootstrapped,
    stop: () => consumer.disconnect(),
  };
}

/** The link to the span a W3C traceparent names (none without one). */
export function linkTo(traceparent: string | null): Link[] {
  const parts = traceparent?.split('-');
  if (!parts || parts.length !== 4) return [];
  const [, traceId, spanId, flags] = parts as [string, string, string, string];
  const traceFlags = parseInt(flags, 16) & TraceFlags.SAMPLED;
  return [{ context: { traceId, spanId, traceFlags, isRemote: true } }];
}

/**
 * The consumer's tracer when the standard variables turn OpenTelemetry on (as for the bridge: OTEL_TRACES_EXPORTER=otlp
 * or an OTLP endpoint, and OTEL_SDK_DISABLED not true), with the provider to shut down at exit; else null.
 */
export function tracingFromEnv(
  env: Record<string, string | undefined> = process.env,
): { tracer: Tracer; shutdown: () => Promise<void> } | null {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const exporterOn = env.OTEL_TRACES_EXPORTER === 'otlp' || (env.OTEL_TRACES_EXPORTER === undefined && !!endpoint);
  if (!exporterOn || env.OTEL_SDK_DISABLED === 'true') return null;
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? 'reviews-feed-example' }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter() })],
  });
  return { tracer: provider.getTracer('reviews-feed-example'), shutdown: () => provider.shutdown() };
}

/** The topics of the bridge's environment variables, with the bridge's defaults. */
export function topicsFromEnv(env: Record<string, string | undefined> = process.env): FeedTopics {
  return {
    state: env.KAFKA_TOPIC_STATE ?? 'review.state',
    created: env.KAFKA_TOPIC_CREATED ?? 'review.created',
    statusChanged: env.KAFKA_TOPIC_STATUS_CHANGED ?? 'review.status_changed',
    updated: env.KAFKA_TOPIC_UPDATED ?? 'review.updated',
    deleted: env.KAFKA_TOPIC_DELETED ?? 'review.deleted',
    heartbeat: env.KAFKA_TOPIC_HEARTBEAT ?? 'review.heartbeat',
  };
}

async function main(): Promise<void> {
  const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',').map((b) => b.trim());
  const tracing = tracingFromEnv();
  const consumer = await startExampleConsumer({
    brokers,
    groupId: process.env.CONSUMER_GROUP ?? 'reviews-feed-example',
    topics: topicsFromEnv(),
    tracer: tracing?.tracer,
  });
  console.log(`bootstrapped ${consumer.bootstrapped} state rows, ${consumer.feed.live().size} live reviews; following`);
  const report = setInterval(() => {
    const beat = consumer.feed.lastHeartbeat;
    console.log(`${consumer.feed.live().size} live reviews; last heartbeat ${beat ? beat.time : 'none yet'}`);
  }, 10_000);
  const stop = () => {
    clearInterval(report);
    void consumer
      .stop()
      .then(() => tracing?.shutdown())
      .then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
