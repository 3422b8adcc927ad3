// An example consumer that takes the feed's contracts from the schema registry (kafkajs and
// @kafkajs/confluent-schema-registry), for a bridge run with SCHEMA_REGISTRY_URL. For every record it
//   1. finds the schema the registry holds for it: the id of its Confluent frame (SCHEMA_REGISTRY_WIRE_FORMAT=
//      confluent), or the id at the end of the `dataschema` URL of a structured CloudEvent (the default);
//      state rows (structured) by the latest schema of their topic's subject, `<topic>-value`;
//   2. validates the value against that schema (the registry client decodes framed values and validates them);
//   3. hands the record, parsed by the consumer kit (which reads both wire formats), to `onRecord`.
// Run it: KAFKA_BROKERS=127.0.0.1:9092 SCHEMA_REGISTRY_URL=http://127.0.0.1:8081/apis/ccompat/v7 \
//   npx tsx examples/registry-consumer.ts   (topics: the bridge's defaults, or the KAFKA_TOPIC_* variables).
// In another service, import from 'reviews-bridge' instead of '../src'.
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { SchemaRegistry, SchemaType } from '@kafkajs/confluent-schema-registry';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { Kafka, logLevel, type KafkaMessage } from 'kafkajs';
import { parseReviewEvent, type ParsedRecord } from '../src/index.js';

/** Options of the registry-aware example consumer. */
export interface RegistryConsumerOptions {
  brokers: string[];
  /** The Confluent-compatible API of the registry (what the bridge's SCHEMA_REGISTRY_URL names). */
  registryUrl: string;
  groupId: string;
  /** The bridge's topics with a contract: the three change topics, deletions, heartbeats, the state topic. */
  topics: string[];
  /** Called for every record that its registered schema accepts, with the id of that schema. */
  onRecord: (record: ParsedRecord, schemaId: number, topic: string) => void;
  /** Called for a record its schema refuses (or that has none); the consumer goes on. */
  onInvalid?: (topic: string, offset: string, reason: string) => void;
}

/** A running registry-aware consumer. */
export interface RegistryConsumer {
  stop(): Promise<void>;
}

/**
 * The registry client. Its JSON Schemas are draft-07 with formats (uuid, date-time): each is compiled by an ajv
 * of its own with the formats added (versions of one subject share their $id, which one ajv would refuse).
 */
export function registryClient(registryUrl: string): SchemaRegistry {
  const compile = (schema: object) => {
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats.default(ajv);
    return ajv.compile(schema);
  };
  const ajvInstance = { compile, addSchema: () => ajvInstance } as unknown as Ajv;
  return new SchemaRegistry({ host: registryUrl }, { [SchemaType.JSON]: { ajvInstance } });
}

const SCHEMA_ID_IN_URL = /\/schemas\/ids\/(\d+)$/;

/** Starts the consumer (a consumer group, from the beginning on its first start). */
export async function startRegistryConsumer(options: RegistryConsumerOptions): Promise<RegistryConsumer> {
  const registry = registryClient(options.registryUrl);
  const kafka = new Kafka({ clientId: 'registry-example', brokers: options.brokers, logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: options.groupId, readUncommitted: false });
  const invalid = options.onInvalid ?? ((topic, offset, reason) => console.warn(`${topic}@${offset}: ${reason}`));

  /** The schema id a record names, validating its value against that schema; throws when it does not match. */
  const check = async (topic: string, message: KafkaMessage): Promise<number> => {
    const value = message.value!;
    if (value[0] === 0) {
      // Framed: decode() reads the id, fetches (and caches) the schema, and validates the JSON against it.
      await registry.decode(value);
      return value.readUInt32BE(1);
    }
    const json = JSON.parse(value.toString('utf8')) as { dataschema?: string };
    const named = typeof json.dataschema === 'string' ? SCHEMA_ID_IN_URL.exec(json.dataschema) : null;
    const id = named ? Number(named[1]) : await registry.getLatestSchemaId(`${topic}-value`);
    const schema = await registry.getSchema(id);
    const problems: string[] = [];
    if (!schema.isValid(json, { errorHook: (path) => problems.push(path.join('.') || '(root)') })) {
      throw new Error(`does not match schema ${id} at ${problems.slice(0, 5).join(', ')}`);
    }
    return id;
  };

  await consumer.connect();
  await consumer.subscribe({ topics: options.topics, fromBeginning: true });
  await consumer.run({
    eachMessage: async ({ topic, message }) => {
      let schemaId = 0;
      try {
        if (message.value !== null) schemaId = await check(topic, message);
        options.onRecord(parseReviewEvent(message), schemaId, topic);
      } catch (err) {
        invalid(topic, message.offset, err instanceof Error ? err.message : String(err));
      }
    },
  });
  return { stop: () => consumer.disconnect() };
}

// Run as a script: print one line per record (type, subject, sequence, the schema id it was checked against).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const env = process.env;
  const consumer = await startRegistryConsumer({
    brokers: (env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
    registryUrl: env.SCHEMA_REGISTRY_URL ?? 'http://127.0.0.1:8081/apis/ccompat/v7',
    groupId: `registry-example-${randomUUID()}`,
    topics: [
      env.KAFKA_TOPIC_CREATED ?? 'review.created',
      env.KAFKA_TOPIC_STATUS_CHANGED ?? 'review.status_changed',
      env.KAFKA_TOPIC_UPDATED ?? 'review.updated',
      env.KAFKA_TOPIC_DELETED ?? 'review.deleted',
      env.KAFKA_TOPIC_HEARTBEAT ?? 'review.heartbeat',
      env.KAFKA_TOPIC_STATE ?? 'review.state',
    ],
    onRecord: (record, schemaId) => {
      const what =
        'event' in record ? `${record.event.type} ${record.event.subject}` : `${record.kind} ${record.reviewId}`;
      console.log(`${what} (schema ${schemaId})`);
    },
  });
  process.on('SIGINT', () => void consumer.stop().then(() => process.exit(0)));
}
