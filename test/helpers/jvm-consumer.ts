import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// The JVM consumer of test/jvm (kafka-clients + a JSON Schema validator, from Maven Central): built once into
// .cache/jvm-consumer/ (again only when its pom or sources change), run as a child process.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PROJECT = join(ROOT, 'test/jvm');
const OUT = join(ROOT, '.cache/jvm-consumer');

/** What the JVM consumer reports: records read per type, and the problems it found (empty: all valid). */
export interface JvmConsumerReport {
  exitCode: number;
  counts: Record<string, number>;
  problems: string[];
  stderr: string;
}

function run(command: string, args: string[], timeoutMs: number) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(command, args, { cwd: ROOT, timeout: timeoutMs, maxBuffer: 8 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : [join(dir, e.name)],
  );
}

let built: Promise<string> | undefined;

/**
 * Compiles the consumer (Maven, repository .cache/m2) unless the cached build is current; its classpath. Call it
 * in a beforeAll with a long timeout: the first build of a fresh clone downloads the plugins and the jars.
 */
export function buildJvmConsumer(): Promise<string> {
  built ??= (async () => {
    const hash = createHash('sha256');
    for (const file of [join(PROJECT, 'pom.xml'), ...sources(join(PROJECT, 'src')).sort()])
      hash.update(readFileSync(file));
    const stamp = hash.digest('hex');
    const stampFile = join(OUT, '.complete');
    const classpathFile = join(OUT, 'classpath.txt');
    if (!existsSync(stampFile) || readFileSync(stampFile, 'utf8') !== stamp) {
      mkdirSync(OUT, { recursive: true });
      const mvn = await run(
        'mvn',
        [
          '-q',
          '-B',
          '-Dstyle.color=never',
          '-f',
          join(PROJECT, 'pom.xml'),
          `-Dmaven.repo.local=${join(ROOT, '.cache/m2')}`,
          `-Dbuild.dir=${OUT}`,
          'compile',
          'dependency:build-classpath',
          `-Dmdep.outputFile=${classpathFile}`,
        ],
        600_000,
      );
      if (mvn.code !== 0) throw new Error(`building the JVM consumer failed:\n${mvn.stdout}${mvn.stderr}`);
      writeFileSync(stampFile, stamp);
    }
    return `${join(OUT, 'classes')}:${readFileSync(classpathFile, 'utf8').trim()}`;
  })();
  return built;
}

/** Runs the JVM consumer over `topics` from the beginning; its report. */
export async function runJvmConsumer(
  brokers: string[],
  registryUrl: string,
  topics: string[],
): Promise<JvmConsumerReport> {
  const classpath = await buildJvmConsumer();
  const result = await run(
    'java',
    ['-cp', classpath, 'reviewsbridge.EventsConsumer', brokers.join(','), registryUrl, ...topics],
    120_000,
  );
  const last = result.stdout.trim().split('\n').pop() ?? '';
  let report: { counts?: Record<string, number>; problems?: string[] } = {};
  try {
    report = JSON.parse(last) as typeof report;
  } catch {
    report = { problems: [`no report: ${result.stdout.slice(-500)}`] };
  }
  return { exitCode: result.code, counts: report.counts ?? {}, problems: report.problems ?? [], stderr: result.stderr };
}
