import { Partitioners, type Kafka, type Producer, type RecordMetadata, type TopicMessages } from 'kafkajs';
import { CommitOutcomeUnknownError, FencedError } from '../core/errors.js';
import type { BridgeConfig } from '../config/config.js';

// Kafka transactions of one account (exactly-once): one transactional producer per leadership, whose transactions
// each carry one commit, bounded by a watchdog, and fenced by the next leader's producer.

/** The transactional producer of this replica's leadership of one account. */
export class Transactions {
  /** The transactional producer of this leadership, and whether the broker fenced it. */
  private tx: { producer: Producer; fenced: boolean } | null = null;
  /** The transaction under way: a producer runs one at a time (a heartbeat waits for the page's commit). */
  private turn: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly kafka: Kafka,
    private readonly config: BridgeConfig['kafka'],
  ) {}

  /**
   * Takes the account's transactional id at the broker for this replica's leadership: the new producer epoch fences
   * every older producer of the id (a former leader, frozen or not) and aborts its open transaction at once, so
   * read_committed readers are not held back until it times out. Call it after winning the lease, before any page.
   */
  async begin(): Promise<void> {
    await this.end();
    const producer = this.kafka.producer({
      transactionalId: this.config.transactionalId,
      transactionTimeout: this.config.transactionTimeoutMs,
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
      // InitProducerId answers CONCURRENT_TRANSACTIONS while the broker aborts a crashed leader's transaction;
      // kafkajs retries it with this policy, which must outlast that abort (seconds), not give up in a few ms.
      retry: { retries: 10, initialRetryTime: 300, maxRetryTime: 5_000 },
    });
    const tx = { producer, fenced: false };
    this.tx = tx;
    const limitMs = this.config.transactionTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    const start = async () => {
      await producer.connect();
      // kafkajs sends the transactional InitProducerId only with the first transaction: open one and abort it
      // now, so that the former leader is fenced (and its open transaction aborted) before this leader's first page.
      const transaction = await producer.transaction();
      await transaction.abort();
    };
    try {
      await Promise.race([
        start(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`taking the transactional id took over ${limitMs} ms`)), limitMs);
        }),
      ]);
    } catch (err) {
      this.drop(tx);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Gives the transactional id up (leadership ends): closes the transactional producer. */
  async end(): Promise<void> {
    const tx = this.tx;
    this.tx = null;
    await tx?.producer.disconnect().catch(() => undefined);
  }

  // One transaction: every send, then commit; any failure aborts it. A fenced producer means another replica took
  // the account at the broker: it is never re-initialised here (that would fence the winner back), only by
  // begin() after this replica wins the lease again.
  async run(sends: TopicMessages[][]): Promise<RecordMetadata[]> {
    const mine = this.turn.then(() => this.runAlone(sends));
    this.turn = mine.catch(() => undefined);
    return mine;
  }

  private async runAlone(sends: TopicMessages[][]): Promise<RecordMetadata[]> {
    if (!this.tx) await this.begin();
    const tx = this.tx!;
    if (tx.fenced) throw new FencedError('the Kafka transactional id was taken by another leader');
    // A bound on the whole transaction: kafkajs can wait for ever on a broker that died mid-request (seen with a
    // killed partition leader or coordinator). Past it the producer is dropped; the next commit starts a new
    // session, whose InitProducerId aborts whatever this one left open.
    const limitMs = Math.max(5_000, Math.floor(this.config.transactionTimeoutMs / 2));
    let timer: NodeJS.Timeout | undefined;
    const watchdog = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`a Kafka transaction took longer than ${limitMs} ms`)), limitMs);
    });
    const transaction = await Promise.race([tx.producer.transaction(), watchdog]).catch((err: unknown) => {
      clearTimeout(timer);
      this.drop(tx);
      throw err;
    });
    // Where the transaction stands: the watchdog leaves run() going, which must then never ask for the commit; once
    // the commit was asked for, a failure no longer says whether the broker committed.
    const at: { stage: 'sending' | 'committing' | 'abandoned' } = { stage: 'sending' };
    try {
      const metadata: RecordMetadata[] = [];
      const run = async () => {
        for (const topicMessages of sends) metadata.push(...(await transaction.sendBatch({ acks: -1, topicMessages })));
        if (at.stage === 'abandoned') throw new Error('the transaction was abandoned by its watchdog');
        at.stage = 'committing';
        await transaction.commit();
      };
      await Promise.race([run(), watchdog]);
      clearTimeout(timer);
      return metadata;
    } catch (err) {
      clearTimeout(timer);
      const committing = at.stage === 'committing';
      at.stage = 'abandoned';
      if (!committing) {
        const aborted = transaction.abort().catch(() => undefined);
        await Promise.race([aborted, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      }
      if (isFencedError(err)) {
        tx.fenced = true;
        throw new FencedError('the Kafka transactional id was taken by another leader');
      }
      // After any other failure the producer's state is unknown: the next commit starts a new producer session,
      // whose InitProducerId returns only once the broker has finished (committed or aborted) this transaction.
      this.drop(tx);
      if (committing) {
        throw new CommitOutcomeUnknownError('a Kafka transaction was asked to commit, and its outcome is unknown', err);
      }
      throw err;
    }
  }

  private drop(tx: { producer: Producer }): void {
    if (this.tx === tx) this.tx = null;
    void tx.producer.disconnect().catch(() => undefined);
  }
}

// Kafka's answers to a producer whose epoch is no longer the transactional id's (another producer initialised it).
const FENCED_TYPES = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED', 'INVALID_PRODUCER_ID_MAPPING']);

/** Whether a kafkajs error (or one it wraps) says the producer was fenced. */
function isFencedError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 8; depth++) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && FENCED_TYPES.has(type)) return true;
    e = (e as { originalError?: unknown; cause?: unknown }).originalError ?? (e as { cause?: unknown }).cause;
  }
  return false;
}
