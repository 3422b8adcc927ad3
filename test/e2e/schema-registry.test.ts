import { beforeAll, describe, expect, it } from 'vitest';
import { parseReviewEvent, type ParsedRecord } from '../../src/consumer/kit.js';
import { registrySchema } from '../../src/core/json-schemas.js';
import { subjectOf } from '../../src/kafka/schema-registry.js';
import {
  bridgeForTest,
  capturedLogger,
  eventually,
  simulatorForTest,
  startTestBridge,
  testEnv,
  type TestBridge,
} from '../helpers/bridge.js';
import { buildJvmConsumer, runJvmConsumer } from '../helpers/jvm-consumer.js';
import { startRegistryConsumer } from '../../examples/registry-consumer.js';
import { readAll, type ReadMessage } from '../helpers/kafka.js';
import { testRegistryUrl } from '../helpers/registry.js';
import { kafkaBrokers, uniqueName } from '../helpers/services.js';
import type { Simulator } from '../../src/simulator/index.js';
import { onTestFinished } from 'vitest';

// The event contracts in a real schema registry (Apicurio Registry, scripts/registry.sh) end to end: the bridge
// registers a subject per topic at start, every event names its registered schema in `dataschema`, a JVM consumer
// (test/jvm: kafka-clients and a JSON Schema validator) reads and validates records of every type in both wire
// formats, and a schema the registry finds incompatible keeps the bridge from starting, saying so.

const RECORD_TOPICS = ['created', 'statusChanged', 'updated', 'deleted', 'heartbeat', 'state'] as const;

async function registryGet<T>(url: string): Promise<T> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return (await res.json()) as T;
}

/** The id of the latest schema under a subject. */
async function latestId(registry: string, subject: string): Promise<number> {
  return (await registryGet<{ id: number }>(`${registry}/subjects/${encodeURIComponent(subject)}/versions/latest`)).id;
}

/**
 * Runs a bridge (with `overrides`) through changes that produce every record type: the initial load (created and
 * state rows), a status change, an edit, a review removed upstream (deleted and a tombstone), heartbeats. Resolves
 * once a complete sweep after the changes and a heartbeat are published.
 */
async function everyRecordType(sim: Simulator, overrides: Record<string, string>): Promise<TestBridge> {
  // One removed review of 20 is 5 %: above the deletion guard's default fraction.
  const env = testEnv(sim.url, { HEARTBEAT_INTERVAL_MS: '1000', DELETE_MAX_FRACTION: '0.5', ...overrides });
  const b = await bridgeForTest(env);
  await eventually(async () => ((await b.store.checkpoint()).initialDone ? true : undefined), 60_000, 'initial load');
  const status = sim.control.get(5)!.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
  sim.control.setStatus(5, { client: status });
  sim.control.edit(6, { comments: 'edited for the registry test' });
  sim.control.removeReview(7);
  const asked = Date.now();
  await b.store.requestSweep();
  await eventually(
    async () => {
      const c = await b.store.checkpoint();
      return (c.lastSweepAt ?? 0) >= asked ? true : undefined;
    },
    60_000,
    'a complete sweep after the changes',
  );
  await eventually(
    async () => ((await readAll([b.topics.heartbeat], { timeoutMs: 10_000 })).length > 0 ? true : undefined),
    30_000,
    'a heartbeat',
  );
  return b;
}

/** Every record of the topics with a contract, parsed by the consumer kit from the bytes as read. */
async function recordsOf(b: TestBridge): Promise<{ message: ReadMessage; record: ParsedRecord }[]> {
  const messages = await readAll(
    RECORD_TOPICS.map((t) => b.topics[t]),
    { timeoutMs: 30_000 },
  );
  return messages.map((message) => ({
    message,
    record: parseReviewEvent({ key: message.key, value: message.bytes ?? null, headers: message.headers }),
  }));
}

/**
 * Runs the kafkajs example (examples/registry-consumer.ts) over the topics until it has seen `count` records of
 * every kind (or found them invalid); the
 * kinds it parsed, with the schema ids it validated them against, and what it found invalid.
 */
async function exampleConsumer(
  registry: string,
  b: TestBridge,
  count: number,
): Promise<{ kinds: Set<string>; invalid: string[] }> {
  const kinds = new Set<string>();
  const invalid: string[] = [];
  let seen = 0;
  const consumer = await startRegistryConsumer({
    brokers: kafkaBrokers(),
    registryUrl: registry,
    groupId: uniqueName('registry-example'),
    topics: RECORD_TOPICS.map((t) => b.topics[t]),
    onRecord: (record, schemaId) => {
      seen++;
      kinds.add(record.kind);
      if (record.kind !== 'tombstone' && schemaId <= 0) invalid.push(`${record.kind} without a schema id`);
    },
    onInvalid: (topic, offset, reason) => {
      seen++;
      invalid.push(`${topic}@${offset}: ${reason}`);
    },
  });
  try {
    // The topics' partitions arrive in any order and heartbeats keep coming: wait for every kind, then the count.
    await eventually(
      async () => (kinds.size >= 7 && seen >= count ? true : undefined),
      60_000,
      `${count} records of all 7 kinds in the example (seen ${seen})`,
    );
  } finally {
    await consumer.stop();
  }
  return { kinds, invalid };
}

describe('schema registry', () => {
  // A fresh clone fetches the registry (about 160 MB from Maven Central) and builds the JVM consumer first.
  beforeAll(async () => {
    await Promise.all([testRegistryUrl(), buildJvmConsumer()]);
  }, 600_000);

  it('registers a subject per topic; every event names its registered schema; the JVM consumer validates all types', async () => {
    const registry = await testRegistryUrl();
    const sim = await simulatorForTest({ reviewCount: 20, seed: 39 });
    const b = await everyRecordType(sim, { SCHEMA_REGISTRY_URL: registry });

    const subjects = await registryGet<string[]>(`${registry}/subjects`);
    const ids: Record<string, number> = {};
    for (const t of RECORD_TOPICS) {
      expect(subjects).toContain(subjectOf(b.topics[t]));
      ids[b.topics[t]] = await latestId(registry, subjectOf(b.topics[t]));
    }
    const records = await recordsOf(b);
    const kinds = new Set(records.map((r) => r.record.kind));
    expect([...kinds].sort()).toEqual(
      ['created', 'deleted', 'heartbeat', 'state', 'status_changed', 'tombstone', 'updated'].sort(),
    );
    for (const { message, record } of records) {
      if (!('event' in record)) continue;
      // Structured JSON as without a registry; only dataschema names the registered schema.
      expect(message.bytes![0]).toBe('{'.charCodeAt(0));
      expect(record.event.dataschema).toBe(`${registry}/schemas/ids/${ids[message.topic]}`);
    }
    // The URL serves the schema registered for the topic.
    const created = records.find((r) => r.record.kind === 'created')!.record as { event: { dataschema: string } };
    const served = await registryGet<{ schema: string }>(created.event.dataschema);
    expect(JSON.parse(served.schema)).toEqual(JSON.parse(registrySchema('review.created', 'structured')));

    const report = await runJvmConsumer(
      kafkaBrokers(),
      registry,
      RECORD_TOPICS.map((t) => b.topics[t]),
    );
    expect(report.problems).toEqual([]);
    expect(report.exitCode, report.stderr).toBe(0);
    for (const type of [
      'review.created',
      'review.status_changed',
      'review.updated',
      'review.deleted',
      'review.heartbeat',
      'review.state',
    ]) {
      expect(report.counts[type], type).toBeGreaterThan(0);
    }

    const example = await exampleConsumer(registry, b, records.length);
    expect(example.invalid).toEqual([]);
    expect(example.kinds).toEqual(kinds);

    expect(await b.app.started).toBe(true);
    // A restart registers nothing new: the subjects keep one version each (idempotent across restarts).
    await b.restart();
    await eventually(
      async () => ((await fetch(`${b.app.ops.url}/readyz`)).ok ? true : undefined),
      60_000,
      'ready again after the restart',
    );
    for (const t of RECORD_TOPICS) {
      const versions = await registryGet<number[]>(`${registry}/subjects/${subjectOf(b.topics[t])}/versions`);
      expect(versions, t).toHaveLength(1);
    }
  });

  it('SCHEMA_REGISTRY_WIRE_FORMAT=confluent: framed values with ce_ headers, read by the kit and the JVM consumer', async () => {
    const registry = await testRegistryUrl();
    const sim = await simulatorForTest({ reviewCount: 20, seed: 40 });
    const b = await everyRecordType(sim, { SCHEMA_REGISTRY_URL: registry, SCHEMA_REGISTRY_WIRE_FORMAT: 'confluent' });

    const records = await recordsOf(b);
    expect(new Set(records.map((r) => r.record.kind)).size).toBe(7);
    for (const { message, record } of records) {
      if (record.kind === 'tombstone') continue;
      const id = await latestId(registry, subjectOf(message.topic));
      expect(message.bytes![0]).toBe(0);
      expect(message.bytes!.readUInt32BE(1)).toBe(id);
      if ('event' in record) {
        expect(message.headers.ce_type).toBe(record.event.type);
        expect(record.event.dataschema).toBe(`${registry}/schemas/ids/${id}`);
      }
    }
    // The subject holds the schema of what is framed: the event's data.
    const served = await registryGet<{ schema: string }>(
      `${registry}/schemas/ids/${await latestId(registry, subjectOf(b.topics.created))}`,
    );
    expect(JSON.parse(served.schema).title).toContain('binary mode');

    const report = await runJvmConsumer(
      kafkaBrokers(),
      registry,
      RECORD_TOPICS.map((t) => b.topics[t]),
    );
    expect(report.problems).toEqual([]);
    expect(report.exitCode, report.stderr).toBe(0);
    expect(
      Object.keys(report.counts)
        .filter((k) => k.startsWith('review.'))
        .sort(),
    ).toEqual(
      [
        'review.created',
        'review.deleted',
        'review.heartbeat',
        'review.state',
        'review.status_changed',
        'review.updated',
      ].sort(),
    );
    const example = await exampleConsumer(registry, b, records.length);
    expect(example.invalid).toEqual([]);
    expect(example.kinds.size).toBe(7);
  });

  it('an incompatible schema refuses the start with one line naming the subject and the change; /readyz and a metric say so', async () => {
    const registry = await testRegistryUrl();
    const sim = await simulatorForTest({ reviewCount: 5, seed: 41 });
    const env = testEnv(sim.url, { SCHEMA_REGISTRY_URL: registry });
    // The subject already holds a version with a field the bridge's schema no longer has: under BACKWARD, the
    // bridge's schema cannot read what was written with that version.
    const subject = subjectOf(env.KAFKA_TOPIC_STATUS_CHANGED!);
    const older = JSON.parse(registrySchema('review.status_changed', 'structured')) as {
      properties: Record<string, unknown>;
    };
    older.properties.legacy_score = { type: 'number' };
    const put = await fetch(`${registry}/subjects/${subject}/versions`, {
      method: 'POST',
      headers: { 'content-type': 'application/vnd.schemaregistry.v1+json' },
      body: JSON.stringify({ schemaType: 'JSON', schema: JSON.stringify(older) }),
    });
    expect(put.status).toBe(200);

    const { logger, lines } = capturedLogger();
    const b = await startTestBridge(env, {}, logger);
    onTestFinished(() => b.stop());
    const refusal = await eventually(
      async () => lines.find((l) => String(l.msg).startsWith('refusing to start')),
      60_000,
      'the refusal line',
    );
    expect(refusal.level).toBe(50);
    expect(String(refusal.msg)).toContain(subject);
    expect(String(refusal.msg)).not.toContain('\n');
    expect(refusal.change).toMatch(/remov|propert/i);

    const ready = await fetch(`${b.app.ops.url}/readyz`);
    expect(ready.status).toBe(503);
    const body = (await ready.json()) as { checks: { schema_registry: string } };
    expect(body.checks.schema_registry).toContain(`incompatible: ${subject}`);
    const metrics = await (await fetch(`${b.app.ops.url}/metrics`)).text();
    expect(metrics).toContain('reviews_bridge_schema_registry_state{state="incompatible"} 1');
    expect(metrics).toContain('reviews_bridge_schema_registry_state{state="registered"} 0');
    // Nothing started: the accounts never will, nothing listed, the subject holds only the older version.
    expect(await b.app.started).toBe(false);
    // No listing request: only the credential check every replica makes, standby or not (its token requests).
    const stats = sim.control.stats();
    expect(stats.requests - stats.tokensIssued).toBe(0);
    expect((await fetch(`${b.app.ops.url}/healthz`)).status).toBe(200);
    expect(await registryGet<number[]>(`${registry}/subjects/${subject}/versions`)).toHaveLength(1);
  });
});
