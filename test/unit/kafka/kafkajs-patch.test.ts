import { createRequire } from 'node:module';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

// The CPU parts of patches/kafkajs+2.2.4.patch must not change a byte on the wire nor a partition: each patched
// function is checked against kafkajs 2.2.4's own code for it (copied below), on random inputs.

const require = createRequire(import.meta.url);

interface LongValue {
  xor(other: LongValue | number): LongValue;
  multiply(other: LongValue): LongValue;
  toInt(): number;
}
interface LongClass {
  fromValue(value: number | LongValue): LongValue;
}
interface EncoderValue {
  buffer: Buffer;
  size(): number;
  writeVarInt(value: number): EncoderValue;
  writeInt8(value: number): EncoderValue;
  writeVarLong(value: number): EncoderValue;
  writeVarIntBytes(value: unknown): EncoderValue;
  writeVarIntString(value: string): EncoderValue;
  writeVarIntArray(values: EncoderValue[]): EncoderValue;
}
interface EncoderClass {
  new (): EncoderValue;
  sizeOfVarInt(value: number): number;
  sizeOfVarLong(value: number): number;
  sizeOfVarIntBytes(value: unknown): number;
}
interface RecordInput {
  key: string | Buffer | null;
  value: string | Buffer | null;
  headers?: Record<string, string | Buffer | (string | Buffer)[]>;
  offsetDelta: number;
  timestampDelta: number;
}
type RequestFn = (options: {
  correlationId: number;
  clientId: string | null;
  request: { apiKey: number; apiVersion: number; encode: () => Promise<EncoderValue> };
}) => Promise<EncoderValue>;
type RecordBatchFn = (options: Record<string, unknown>) => Promise<EncoderValue>;

const Long = require('kafkajs/src/utils/long') as LongClass;
const Encoder = require('kafkajs/src/protocol/encoder') as EncoderClass;
const murmur2 = require('kafkajs/src/producer/partitioners/default/murmur2') as (key: unknown) => number;
const Record = require('kafkajs/src/protocol/recordBatch/record/v0') as (input: RecordInput) => EncoderValue;
const { RecordBatch } = require('kafkajs/src/protocol/recordBatch/v0') as { RecordBatch: RecordBatchFn };
const encodeRequest = require('kafkajs/src/protocol/request') as RequestFn;
interface ProduceMessage {
  key: string;
  value: string;
  timestamp: number;
  headers?: Record<string, string>;
}
interface ProduceTopic {
  topic: string;
  partitions: { partition: number; firstSequence: number; messages: ProduceMessage[] }[];
}
type ProduceRequest = Parameters<RequestFn>[0]['request'];
const produceV7 = require('kafkajs/src/protocol/requests/produce/v7/request') as (options: {
  acks: number;
  timeout: number;
  transactionalId: string | null;
  producerId: LongValue;
  producerEpoch: number;
  compression: number;
  topicData: ProduceTopic[];
}) => ProduceRequest;
interface Crc32C {
  (buffer: Buffer): number;
  portable: (buffer: Buffer) => number;
  native: ((buffer: Buffer) => number) | null;
}
const crc32C = require('kafkajs/src/protocol/recordBatch/crc32C/crc32C') as Crc32C;
const groupMessagesPerPartition = require('kafkajs/src/producer/groupMessagesPerPartition') as (options: {
  topic: string;
  partitionMetadata: unknown[];
  messages: { key: string }[];
  partitioner: (options: { message: { key: string } }) => number;
}) => Record<string, { key: string }[]>;

/** kafkajs 2.2.4's murmur2, in 64-bit Long arithmetic. */
function murmur2Reference(key: unknown): number {
  const M = Long.fromValue(0x5bd1e995);
  const data = Buffer.isBuffer(key) ? key : Buffer.from(String(key));
  const length = data.length;
  let h = Long.fromValue(Long.fromValue(0x9747b28c).xor(length));
  for (let i = 0; i < Math.floor(length / 4); i++) {
    const i4 = i * 4;
    const k0 = data[i4]! + (data[i4 + 1]! << 8) + (data[i4 + 2]! << 16) + (data[i4 + 3]! << 24);
    let k = Long.fromValue(k0).multiply(M);
    k = k.xor(k.toInt() >>> 24);
    k = Long.fromValue(k).multiply(M);
    h = h.multiply(M).xor(k);
  }
  // The tail bytes, highest first (kafkajs' switch falls through from case 3 to case 1).
  const tail = length & ~3;
  const rest = length % 4;
  if (rest >= 3) h = h.xor(data[tail + 2]! << 16);
  if (rest >= 2) h = h.xor(data[tail + 1]! << 8);
  if (rest >= 1) h = h.xor(data[tail]!).multiply(M);
  h = h.xor(h.toInt() >>> 13).multiply(M);
  h = h.xor(h.toInt() >>> 15);
  return h.toInt();
}

/** kafkajs 2.2.4's record encoder: an Encoder per header, the record's size computed apart. */
function recordReference({ offsetDelta, timestampDelta, key, value, headers = {} }: RecordInput): Buffer {
  const list = Object.keys(headers).flatMap((k) => {
    const v = headers[k]!;
    return Array.isArray(v) ? v.map((item) => ({ key: k, value: item })) : [{ key: k, value: v }];
  });
  let headersSize = Encoder.sizeOfVarInt(list.length);
  for (const h of list) {
    const keySize = Buffer.byteLength(h.key);
    const valueSize = Buffer.byteLength(h.value);
    headersSize += Encoder.sizeOfVarInt(keySize) + keySize + Encoder.sizeOfVarInt(valueSize) + valueSize;
  }
  const sizeOfBody =
    1 +
    Encoder.sizeOfVarLong(timestampDelta) +
    Encoder.sizeOfVarInt(offsetDelta) +
    Encoder.sizeOfVarIntBytes(key) +
    Encoder.sizeOfVarIntBytes(value) +
    headersSize;
  return new Encoder()
    .writeVarInt(sizeOfBody)
    .writeInt8(0)
    .writeVarLong(timestampDelta)
    .writeVarInt(offsetDelta)
    .writeVarIntBytes(key)
    .writeVarIntBytes(value)
    .writeVarIntArray(list.map((h) => new Encoder().writeVarIntString(h.key).writeVarIntBytes(h.value))).buffer;
}

const bytes = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.string({ unit: 'grapheme-ascii', maxLength: 3000 }),
  fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)),
);
const record: fc.Arbitrary<RecordInput> = fc.record({
  key: fc.option(bytes),
  value: fc.option(bytes),
  headers: fc.option(fc.dictionary(fc.string(), fc.oneof(bytes, fc.array(bytes, { maxLength: 3 }))), {
    nil: undefined,
  }),
  offsetDelta: fc.oneof(fc.nat(200), fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 })),
  timestampDelta: fc.oneof(
    fc.integer({ min: -1000, max: 1000 }),
    fc.constantFrom(2 ** 29 - 1, 2 ** 29, -(2 ** 29), -(2 ** 29) - 1, 2 ** 40, -(2 ** 45)),
    fc.integer(),
  ),
});

describe('kafkajs patch (CPU per record): same bytes, same partitions', () => {
  it('murmur2 in 32-bit arithmetic equals the Long version (property)', () => {
    const key = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.nat().map(String),
      fc.uint8Array().map((a) => Buffer.from(a)),
    );
    fc.assert(
      fc.property(key, (k) => murmur2(k) === murmur2Reference(k)),
      { numRuns: 2000 },
    );
    // Java's Utils.murmur2 of "21" (the broker side agrees on partitions).
    expect(murmur2('21')).toBe(murmur2Reference('21'));
  });

  it('a record is encoded as before (property)', () => {
    fc.assert(
      fc.property(record, (r) => Record(r).buffer.equals(recordReference(r))),
      { numRuns: 1000 },
    );
    // What the size computation refused before still throws.
    expect(() =>
      Record({ key: 'k', value: 'v', headers: { h: null as never }, offsetDelta: 0, timestampDelta: 0 }),
    ).toThrow(TypeError);
  });

  it('a record batch is encoded as before: length, epoch, magic, CRC-32C and body (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(record, { maxLength: 20 }), fc.nat(5), async (records, epoch) => {
        const batch = await RecordBatch({
          records: records.map(Record),
          firstTimestamp: 1_700_000_000_000,
          maxTimestamp: 1_700_000_000_005,
          partitionLeaderEpoch: epoch,
          lastOffsetDelta: records.length - 1,
          transactional: true,
        });
        const body = batch.buffer.subarray(21);
        const expected = Buffer.alloc(21);
        expected.writeBigInt64BE(0n, 0);
        expected.writeInt32BE(9 + body.length, 8);
        expected.writeInt32BE(epoch, 12);
        expected.writeInt8(2, 16);
        // The body: its 36-byte header, the record count, then each record as encoded alone.
        const records0 = Buffer.concat(records.map(recordReference));
        return (
          batch.buffer.subarray(0, 17).equals(expected.subarray(0, 17)) &&
          body.subarray(40).equals(records0) &&
          body.readInt32BE(36) === records.length &&
          batch.buffer.readUInt32BE(17) === crc32cReference(body)
        );
      }),
      { numRuns: 200 },
    );
  });

  it('the CRC-32C of a batch is the checksum, native and portable alike, of any part of a buffer (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 3000 }), fc.nat(), fc.nat(), (data, a, b) => {
        const whole = Buffer.from(data);
        const start = whole.length === 0 ? 0 : a % whole.length;
        const part = whole.subarray(start, start + (b % (whole.length - start + 1)));
        const expected = crc32cReference(part);
        return (
          crc32C(part) === expected &&
          crc32C.portable(part) === expected &&
          (crc32C.native === null || crc32C.native(part) === expected)
        );
      }),
      { numRuns: 300 },
    );
  });

  it('takes the native checksum where @node-rs/crc32 has a prebuilt addon (Linux x64, the CI and the image)', () => {
    if (process.platform === 'linux' && process.arch === 'x64') expect(crc32C.native).toBeTypeOf('function');
    expect(crc32C(Buffer.from('123456789'))).toBe(0xe3069283);
  });

  it('frames a request as before: size, api key and version, correlation id, client id, payload (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.option(fc.string({ unit: 'binary' })), bytes, fc.nat(), async (clientId, payload, id) => {
        const body = new Encoder().writeVarIntBytes(payload);
        const request = { apiKey: 0, apiVersion: 7, encode: () => Promise.resolve(body) };
        const framed = (await encodeRequest({ correlationId: id, clientId, request })).buffer;
        const head = Buffer.alloc(10);
        head.writeInt16BE(0, 0);
        head.writeInt16BE(7, 2);
        head.writeInt32BE(id, 4);
        const client = clientId === null ? Buffer.alloc(0) : Buffer.from(clientId);
        head.writeInt16BE(clientId === null ? -1 : client.length, 8);
        const rest = Buffer.concat([head, client, body.buffer]);
        return framed.readInt32BE(0) === rest.length && framed.subarray(4).equals(rest);
      }),
      { numRuns: 300 },
    );
  });

  it('frames a produce request as kafkajs 2.2.4 did: every batch behind its partition and topic, one buffer (property)', async () => {
    const message = fc.record({
      key: fc.string({ maxLength: 12 }),
      value: fc.string({ unit: 'grapheme-ascii', maxLength: 400 }),
      timestamp: fc.integer({ min: 1_700_000_000_000, max: 1_700_000_100_000 }),
      headers: fc.option(fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })), { nil: undefined }),
    });
    const topics = fc.array(
      fc.record({
        topic: fc.string({ minLength: 1, maxLength: 20 }),
        partitions: fc.array(
          fc.record({
            partition: fc.nat(20),
            firstSequence: fc.nat(1000),
            messages: fc.array(message, { minLength: 1, maxLength: 8 }),
          }),
          { minLength: 1, maxLength: 3 },
        ),
      }),
      { minLength: 1, maxLength: 3 },
    );
    await fc.assert(
      fc.asyncProperty(
        topics,
        fc.option(fc.string({ maxLength: 30 })),
        fc.option(fc.string({ maxLength: 30 })),
        fc.nat(),
        async (topicData, transactionalId, clientId, correlationId) => {
          const producerId = Long.fromValue(7);
          const request = produceV7({
            acks: -1,
            timeout: 30_000,
            transactionalId,
            producerId,
            producerEpoch: 2,
            compression: 0,
            topicData,
          });
          const framed = (await encodeRequest({ correlationId, clientId, request })).buffer;
          // kafkajs 2.2.4's layout, built level by level: each batch (checked above) behind its partition header,
          // each partition array behind its topic, the topics behind the request's fields, all behind the frame.
          const str = (v: string | null) => {
            const b = v === null ? Buffer.alloc(0) : Buffer.from(v);
            const h = Buffer.alloc(2);
            h.writeInt16BE(v === null ? -1 : b.length);
            return Buffer.concat([h, b]);
          };
          const int = (v: number, bytes: 2 | 4) => {
            const b = Buffer.alloc(bytes);
            if (bytes === 2) b.writeInt16BE(v);
            else b.writeInt32BE(v);
            return b;
          };
          const parts: Buffer[] = [str(transactionalId), int(-1, 2), int(30_000, 4), int(topicData.length, 4)];
          for (const t of topicData) {
            parts.push(str(t.topic), int(t.partitions.length, 4));
            for (const p of t.partitions) {
              const first = Math.min(...p.messages.map((m) => m.timestamp));
              const batch = await RecordBatch({
                compression: 0,
                records: p.messages.map((m, i) =>
                  Record({ ...m, offsetDelta: i, timestampDelta: m.timestamp - first }),
                ),
                firstTimestamp: first,
                maxTimestamp: Math.max(...p.messages.map((m) => m.timestamp)),
                producerId,
                producerEpoch: 2,
                firstSequence: p.firstSequence,
                transactional: Boolean(transactionalId), // as kafkajs: an empty id is not transactional
                lastOffsetDelta: p.messages.length - 1,
              });
              parts.push(int(p.partition, 4), int(batch.buffer.length, 4), batch.buffer);
            }
          }
          const payload = Buffer.concat(parts);
          const head = Buffer.concat([int(0, 2), int(7, 2), int(correlationId, 4), str(clientId)]);
          const rest = Buffer.concat([head, payload]);
          return (
            framed.readInt32BE(0) === rest.length &&
            framed.subarray(4).equals(rest) &&
            (await request.encode()).buffer.equals(payload)
          );
        },
      ),
      { numRuns: 150 },
    );
  });

  it('groups messages per partition in order', () => {
    const messages = Array.from({ length: 50 }, (_, i) => ({ key: String(i) }));
    const grouped = groupMessagesPerPartition({
      topic: 't',
      partitionMetadata: [{}, {}, {}],
      messages,
      partitioner: ({ message }) => Number(message.key) % 3,
    });
    expect(Object.keys(grouped)).toEqual(['0', '1', '2']);
    for (const p of [0, 1, 2]) expect(grouped[p]).toEqual(messages.filter((_, i) => i % 3 === p));
    expect(groupMessagesPerPartition({ topic: 't', partitionMetadata: [], messages, partitioner: () => 0 })).toEqual(
      {},
    );
  });
});

/** CRC-32C (Castagnoli), bit by bit. */
function crc32cReference(data: Buffer): number {
  let crc = 0xffffffff;
  for (const byte of data) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}
