import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';

/** Options of waitForKafka. */
export interface WaitForKafkaOptions {
  /** Give up after this long. */
  timeoutMs: number;
  /** Polled between attempts so a broker that crashed fails fast instead of after the whole timeout. */
  isAlive?: () => boolean;
  /** Called with the last error of each failed attempt (progress output). */
  onRetry?: (error: unknown, elapsedMs: number) => void;
  /** Replication factor of the probe topic: 3 on a three-broker cluster waits until all three serve. */
  replicationFactor?: number;
}

/**
 * Resolves once the broker really serves requests: a listening port is not enough (a KRaft broker accepts
 * connections before its metadata is loaded), so it creates and deletes a throw-away topic, which needs the
 * controller, the metadata log and a partition leader, exactly what the tests need next.
 */
export async function waitForKafka(brokers: string[], options: WaitForKafkaOptions): Promise<void> {
  const started = Date.now();
  let lastError: unknown;
  for (;;) {
    if (options.isAlive && !options.isAlive()) {
      throw new Error(`Kafka process exited before it became ready (last error: ${describe(lastError)})`);
    }
    try {
      await probeOnce(brokers, options.replicationFactor ?? 1);
      return;
    } catch (error) {
      lastError = error;
      options.onRetry?.(error, Date.now() - started);
    }
    if (Date.now() - started > options.timeoutMs) {
      throw new Error(
        `Kafka at ${brokers.join(',')} not ready after ${options.timeoutMs} ms (last error: ${describe(lastError)})`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

async function probeOnce(brokers: string[], replicationFactor: number): Promise<void> {
  // No retries and short timeouts: the outer loop owns the schedule, and kafkajs' own backoff would hide progress.
  const kafka = new Kafka({
    clientId: 'ready-check',
    brokers,
    connectionTimeout: 2_000,
    requestTimeout: 10_000,
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING,
  });
  const admin = kafka.admin();
  const topic = `ready-check-${randomBytes(6).toString('hex')}`;
  try {
    await admin.connect();
    await admin.createTopics({
      topics: [{ topic, numPartitions: 1, replicationFactor }],
      waitForLeaders: true,
      timeout: 10_000,
    });
    await admin.deleteTopics({ topics: [topic], timeout: 10_000 });
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// CLI for scripts/kafka.sh: tsx scripts/kafka/ready.ts <brokers> <timeoutSeconds> [pid|-] [replicationFactor]
async function main(argv: string[]): Promise<number> {
  const [brokerList, timeoutArg, pidArg, rfArg] = argv;
  if (!brokerList || !timeoutArg) {
    console.error('usage: ready.ts <host:port[,host:port]> <timeoutSeconds> [pid|-] [replicationFactor]');
    return 2;
  }
  const pid = pidArg && pidArg !== '-' ? Number(pidArg) : undefined;
  let lastReport = 0;
  try {
    await waitForKafka(brokerList.split(','), {
      timeoutMs: Number(timeoutArg) * 1000,
      replicationFactor: rfArg ? Number(rfArg) : 1,
      isAlive: pid === undefined ? undefined : () => pidAlive(pid),
      onRetry: (error, elapsed) => {
        // One line every ~10 s keeps CI logs readable while showing it is not stuck.
        if (elapsed - lastReport >= 10_000) {
          lastReport = elapsed;
          console.error(`kafka: still waiting (${Math.round(elapsed / 1000)} s): ${describe(error)}`);
        }
      },
    });
    return 0;
  } catch (error) {
    console.error(`kafka: ${describe(error)}`);
    return 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
