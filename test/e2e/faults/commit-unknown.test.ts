import { connect, type Socket } from 'node:net';
import type { ISocketFactory } from 'kafkajs';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { ReviewEvent } from '../../../src/core/events.js';
import {
  capturedLogger,
  eventually,
  initialLoadDone,
  simulatorForTest,
  startTestBridge,
  testEnv,
} from '../../helpers/bridge.js';
import { readAll } from '../../helpers/kafka.js';

// The answer to a Kafka commit lost on the wire: the leader's connection to the transaction coordinator is cut
// right after it sent EndTxn(commit), which the broker carries out. The bridge cannot tell whether the page landed.
// Deriving it again would publish its events a second time to read_committed readers (or, had the upstream moved
// meanwhile, other events under the same ids). It readies the leadership instead, as a new leader does: a new
// producer session (InitProducerId waits until the broker has finished that transaction), then the changelog's
// tail applied to Redis. The broker and Redis are real; only the one answer is lost, by the socket that carried it.

/** Kafka's API key of EndTxn (the request's int16 after its int32 size). */
const END_TXN = 26;
/** Kafka's API key of Produce. */
const PRODUCE = 0;

/**
 * kafkajs sockets that, once armed, lose the broker's answer to the first EndTxn that follows a Produce naming
 * `topic`: the request goes out, the socket stops reading, and is destroyed once the broker has had time to act.
 */
class LossyWire {
  private armed = false;
  private produced = false;
  /** How many answers it lost. */
  cuts = 0;

  constructor(private readonly topic: string) {}

  arm(): void {
    this.armed = true;
    this.produced = false;
  }

  readonly factory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket: Socket = connect({ host, port }, onConnect);
    const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (this.armed && Buffer.isBuffer(chunk) && chunk.length >= 6) {
        const apiKey = chunk.readInt16BE(4);
        if (apiKey === PRODUCE && chunk.includes(this.topic)) this.produced = true;
        if (apiKey === END_TXN && this.produced) {
          this.armed = false;
          this.cuts += 1;
          socket.pause();
          const sent = write(chunk, ...rest);
          setTimeout(() => socket.destroy(new Error('connection reset (test)')), 1_000);
          return sent;
        }
      }
      return write(chunk, ...rest);
    }) as Socket['write'];
    return socket;
  };
}

describe('fault: the answer to a Kafka commit is lost', () => {
  it('applies the commit that landed from the changelog: each event once, the sequence unbroken', async () => {
    const sim = await simulatorForTest({ reviewCount: 30, seed: 17 });
    const env = testEnv(sim.url, { POLL_INTERVAL_MS: '200', HEARTBEAT_INTERVAL_MS: '86400000' });
    const wire = new LossyWire(env.KAFKA_TOPIC_STATUS_CHANGED!);
    const captured = capturedLogger('info');
    const b = await startTestBridge(env, { kafkaSocketFactory: wire.factory }, captured.logger);
    onTestFinished(() => b.stop());
    await initialLoadDone(b);

    const id = 7;
    const flip = () => {
      const to = sim.control.get(id)!.client_publication_status === 'REJECTED' ? 'APPROVED' : 'REJECTED';
      sim.control.setStatus(id, { client: to });
      return to;
    };
    const sequenceOf = async () => (await b.store.read([id])).get(id)?.sequence ?? 0;
    const before = await sequenceOf();
    wire.arm();
    const first = flip();
    await eventually(async () => (wire.cuts === 1 ? true : undefined), 15_000, 'the commit whose answer is lost');
    // Redis comes to hold the change again, however the bridge learns of it; then the review changes once more.
    await eventually(async () => ((await sequenceOf()) > before ? true : undefined), 30_000, 'the change in Redis');
    const second = flip();

    const records = await readAll([b.topics.statusChanged], { untilCount: 2, idleMs: 2_000, timeoutMs: 30_000 });
    const events = records.map((r) => JSON.parse(r.value) as ReviewEvent).filter((e) => e.subject === String(id));
    // Exactly once for this read_committed reader: no id twice, one event per sequence, in order, with no gap.
    expect(events.map((e) => e.id)).toEqual([...new Set(events.map((e) => e.id))]);
    expect(events.map((e) => e.data.review.client_publication_status)).toEqual([first, second]);
    expect(events.map((e) => Number(e.sequence))).toEqual([before + 1, before + 2]);
    expect(wire.cuts).toBe(1);
    // How: the unknown outcome was said, and the landed commit was applied from the changelog, not derived again.
    const said = (msg: string) => captured.lines.some((l) => l.msg === msg);
    expect(said('a Kafka commit may have landed unseen; the changelog decides before the pass runs again')).toBe(true);
    expect(said('applied Kafka commits Redis had missed')).toBe(true);
  });
});
