import { parse, parseDocument } from 'yaml';
import { EnvSchema } from '../../src/config/config.js';
import { REJECT_KINDS } from '../../src/core/reject.js';
import { deadLetterMessage } from '../../src/core/event-size.js';
import { FingerprintKey } from '../../src/core/fingerprint-key.js';
import { keyedRecordDigest } from '../../src/core/record-digest.js';
import { rejectId } from '../../src/upstream/validate.js';

// The numbers and names the docs state, read out of the docs, the manifests (parsed as YAML), the configuration
// reference and the code, and compared. Pure: it is handed the files' texts, so a test can hand it a copy with one
// of the former disagreements put back and see it named.

/** The files the check reads, by path from the repository root. */
export const AGREEMENT_FILES = [
  'README.md',
  'docs/operations.md',
  'docs/benchmarks.md',
  'docs/consumers.md',
  'docs/exactly-once.md',
  'docs/reference/configuration.md',
  'deploy/k8s/deployment.yaml',
  'deploy/k8s/configmap.yaml',
  'docker-compose.yml',
  'Dockerfile',
] as const;

/** The texts of AGREEMENT_FILES. */
export type AgreementFiles = Record<(typeof AGREEMENT_FILES)[number], string>;

/** One statement found in a file, or a problem finding it. */
function found(text: string, pattern: RegExp, where: string, problems: string[]): RegExpMatchArray | null {
  // Line breaks of wrapped Markdown and comments are spaces.
  const match = text.replace(/\s*\n\s*(?:#\s*)?/g, ' ').match(pattern);
  if (!match) problems.push(`${where}: no statement matching ${pattern} (the check reads it there)`);
  return match;
}

/** Kubernetes and compose memory quantities in MiB ("256Mi", "384m", "1Gi"); NaN when not one. */
export function mebibytes(quantity: unknown): number {
  const m = String(quantity).match(/^(\d+(?:\.\d+)?)\s*(Mi|M|m|Gi|G|g|MiB|GiB)?$/);
  if (!m) return Number.NaN;
  return /^g/i.test(m[2] ?? '') ? Number(m[1]) * 1024 : Number(m[1]);
}

/** A setting's value as the schema reads `raw` (undefined: the default), or undefined when it has none. */
function schemaValue(name: string, raw?: string): unknown {
  const shape = EnvSchema.shape as Record<string, { safeParse(v: unknown): { success: boolean; data?: unknown } }>;
  const parsed = shape[name]?.safeParse(raw);
  return parsed?.success ? parsed.data : undefined;
}

/** A setting's default as the schema declares it (undefined: none). */
function schemaDefault(name: string): unknown {
  return schemaValue(name);
}

/** The default column of a setting in the generated configuration reference. */
function referenceDefault(reference: string, name: string): string | undefined {
  return reference.match(new RegExp(`^\\| \`${name}\` \\| \`?([^|\`]*)\`? \\|`, 'm'))?.[1];
}

/** A Kubernetes object of a multi-document manifest by kind. */
function manifest(text: string, kind: string): Record<string, unknown> {
  const docs = text
    .split(/^---$/m)
    .map((part) => parse(part) as Record<string, unknown> | null)
    .filter((d): d is Record<string, unknown> => d !== null && typeof d === 'object');
  const doc = docs.find((d) => d.kind === kind);
  if (!doc) throw new Error(`no ${kind} in the manifest`);
  return doc;
}

/** The bridge container of the Deployment, its spec and the comment above its resources. */
function deployment(text: string) {
  const doc = manifest(text, 'Deployment') as {
    spec: {
      strategy?: { type?: string; rollingUpdate?: { maxUnavailable?: unknown } };
      template: { spec: { terminationGracePeriodSeconds?: number; containers: Record<string, unknown>[] } };
    };
  };
  const containers = doc.spec.template.spec.containers;
  const index = containers.findIndex((c) => c.name === 'reviews-bridge');
  const container = containers[index === -1 ? 0 : index]! as {
    resources: { requests: { cpu: string; memory: string }; limits: { memory: string } };
  };
  const node = parseDocument(text.split(/^---$/m).find((p) => /^kind: Deployment$/m.test(p)) ?? text).getIn(
    ['spec', 'template', 'spec', 'containers', Math.max(index, 0)],
    true,
  ) as { items?: { key: { value: string; commentBefore?: string } }[] } | undefined;
  const resourcesComment = node?.items?.find((pair) => pair.key.value === 'resources')?.key.commentBefore ?? '';
  return { spec: doc.spec, container, resourcesComment };
}

/** The bridge's settings in docker-compose.yml (the anchored environment) and its memory and grace period. */
function compose(text: string) {
  const doc = parse(text, { merge: true }) as Record<string, Record<string, unknown>>;
  const bridge = doc['x-bridge'] as {
    environment: Record<string, string>;
    mem_reservation?: string;
    mem_limit?: string;
    stop_grace_period?: string;
  };
  return bridge;
}

/** Seconds of a compose duration ("30s", "1m30s"). */
function seconds(duration: unknown): number {
  const m = String(duration).match(/^(?:(\d+)m)?(?:(\d+)s)?$/);
  return m ? Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0) : Number.NaN;
}

/** The dead-letter message key the code gives a rejected record. */
function deadLetterKeyOf(record: unknown): string | null {
  const key = new FingerprintKey(Buffer.alloc(32, 7));
  const id = rejectId(record);
  const message = deadLetterMessage(
    {
      reject: { id, reason: REJECT_KINDS[1], detail: 'id:invalid_type', raw: record, position: 0 },
      pass: 'incremental',
      detectedAt: 0,
      recordKey: id === null ? keyedRecordDigest(record, key) : null,
    },
    'acme',
    1_000_000,
  );
  return message.key === null || message.key === undefined ? null : String(message.key);
}

/** An `id` as a doc example names it (`4711`, `abc`, `a b`, "an object", "none") as the value a record carries. */
function exampleId(word: string): { present: boolean; value?: unknown } {
  if (word === 'none') return { present: false };
  if (word === 'an object') return { present: true, value: { nested: 1 } };
  const inner = word.replace(/^`|`$/g, '');
  return { present: true, value: /^\d+$/.test(inner) ? Number(inner) : inner };
}

/** Every disagreement between the docs, the manifests, the configuration reference and the code. */
export function disagreements(files: AgreementFiles): string[] {
  const problems: string[] = [];
  const ops = files['docs/operations.md'];
  const { spec, container, resourcesComment } = deployment(files['deploy/k8s/deployment.yaml']);
  const { requests, limits } = container.resources;
  const request = mebibytes(requests.memory);
  const limit = mebibytes(limits.memory);
  const bridge = compose(files['docker-compose.yml']);
  const configMap = (manifest(files['deploy/k8s/configmap.yaml'], 'ConfigMap').data ?? {}) as Record<string, string>;

  // Resources: what operations.md and benchmarks.md say the manifests reserve, and compose the same.
  const k8s = found(ops, /requests (\S+) CPU \/ (\S+), limit (\S+);/, 'docs/operations.md (Kubernetes)', problems);
  if (k8s) {
    if (k8s[1] !== requests.cpu)
      problems.push(`docs/operations.md says a CPU request of ${k8s[1]}, deployment.yaml ${requests.cpu}`);
    if (mebibytes(k8s[2]) !== request || mebibytes(k8s[3]) !== limit)
      problems.push(
        `docs/operations.md says requests ${k8s[2]} / limit ${k8s[3]}, deployment.yaml ${requests.memory} / ${limits.memory}`,
      );
  }
  for (const [path, pattern] of [
    ['docs/operations.md', /reserve (\d+) MiB and limit\s+(\d+) MiB/],
    ['docs/benchmarks.md', /Request (\d+) MiB, limit (\d+) MiB/],
  ] as const) {
    const m = found(files[path], pattern, path, problems);
    if (m && (Number(m[1]) !== request || Number(m[2]) !== limit))
      problems.push(`${path} says ${m[1]} / ${m[2]} MiB, deployment.yaml ${requests.memory} / ${limits.memory}`);
  }
  if (mebibytes(bridge.mem_reservation) !== request || mebibytes(bridge.mem_limit) !== limit)
    problems.push(
      `docker-compose.yml reserves ${bridge.mem_reservation} / ${bridge.mem_limit}, deployment.yaml ${requests.memory} / ${limits.memory}`,
    );

  // Memory figures: the measured peak of docs/benchmarks.md is the source; the README and the manifest quote it.
  const verdict = found(
    files['docs/benchmarks.md'],
    /Verdict of the run: `"met": true` \(peak (\d+) MiB/,
    'docs/benchmarks.md (Memory)',
    problems,
  );
  if (verdict) {
    const peak = Number(verdict[1]);
    const readme = found(files['README.md'], /(\d+) MiB at peak/, 'README.md', problems);
    if (readme && Number(readme[1]) !== peak)
      problems.push(`README.md says a peak of ${readme[1]} MiB, docs/benchmarks.md measured ${peak} MiB`);
    const comment = found(resourcesComment, /peaks at ~(\d+) MiB/, 'deploy/k8s/deployment.yaml (resources)', problems);
    if (comment && Number(comment[1]) !== peak)
      problems.push(`deployment.yaml's comment says a peak of ~${comment[1]} MiB, docs/benchmarks.md measured ${peak}`);
    if (request < peak)
      problems.push(`deployment.yaml requests ${requests.memory}, below the measured peak ${peak} MiB`);
  }

  // The poll interval the README promises, the default and the shipped settings.
  const promise = found(files['README.md'], /polls every (second|(\d+) seconds)/, 'README.md', problems);
  if (promise) {
    const promisedMs = promise[1] === 'second' ? 1000 : Number(promise[2]) * 1000;
    const shipped: [string, unknown][] = [
      ['the POLL_INTERVAL_MS default (src/config/config.ts)', schemaDefault('POLL_INTERVAL_MS')],
      [
        'docs/reference/configuration.md',
        referenceDefault(files['docs/reference/configuration.md'], 'POLL_INTERVAL_MS'),
      ],
      ['deploy/k8s/configmap.yaml', configMap.POLL_INTERVAL_MS],
      ['docker-compose.yml', bridge.environment.POLL_INTERVAL_MS],
    ];
    for (const [where, value] of shipped) {
      if (value !== undefined && Number(value) !== promisedMs)
        problems.push(
          `README.md promises polls every ${promisedMs} ms, ${where} sets POLL_INTERVAL_MS ${String(value)}`,
        );
    }
  }

  // Names: every key the manifests set is a setting of the schema, and every default the reference states is the
  // schema's.
  const known = new Set(Object.keys(EnvSchema.shape));
  for (const [where, env] of [
    ['deploy/k8s/configmap.yaml', configMap],
    ['docker-compose.yml', bridge.environment],
  ] as const) {
    for (const name of Object.keys(env)) if (!known.has(name)) problems.push(`${where} sets ${name}, not a setting`);
  }
  for (const name of known) {
    const stated = referenceDefault(files['docs/reference/configuration.md'], name);
    const actual = schemaDefault(name);
    const read = stated === undefined ? undefined : schemaValue(name, stated);
    if (stated !== undefined && stated !== 'unset' && JSON.stringify(read) !== JSON.stringify(actual))
      problems.push(`docs/reference/configuration.md says ${name} defaults to ${stated}, the schema ${String(actual)}`);
  }
  const dockerPort = files.Dockerfile.match(/HTTP_PORT=(\d+)/)?.[1];
  if (dockerPort !== String(schemaDefault('HTTP_PORT')))
    problems.push(`Dockerfile sets HTTP_PORT=${dockerPort}, the default is ${String(schemaDefault('HTTP_PORT'))}`);

  // Shutdown: the grace period above the bridge's own bound, as the docs say.
  const grace = spec.template.spec.terminationGracePeriodSeconds;
  const shutdownMs = Number(configMap.SHUTDOWN_TIMEOUT_MS ?? schemaDefault('SHUTDOWN_TIMEOUT_MS'));
  const stated = found(
    ops,
    /grace period (\d+) s, above `SHUTDOWN_TIMEOUT_MS` \((\d+) s\)/,
    'docs/operations.md',
    problems,
  );
  if (stated && (Number(stated[1]) !== grace || Number(stated[2]) * 1000 !== shutdownMs))
    problems.push(
      `docs/operations.md says a grace period of ${stated[1]} s above ${stated[2]} s, the manifests ${grace} s and ${shutdownMs} ms`,
    );
  if (grace === undefined || grace * 1000 <= shutdownMs)
    problems.push(`terminationGracePeriodSeconds ${grace} is not above SHUTDOWN_TIMEOUT_MS ${shutdownMs}`);
  if (seconds(bridge.stop_grace_period) * 1000 <= Number(bridge.environment.SHUTDOWN_TIMEOUT_MS ?? shutdownMs))
    problems.push(
      `docker-compose.yml's stop_grace_period ${bridge.stop_grace_period} is not above SHUTDOWN_TIMEOUT_MS`,
    );

  // Key formats: the dead-letter keys docs/consumers.md describes are the keys the code gives.
  const consumers = files['docs/consumers.md'];
  const keyed = found(
    consumers,
    /an `id` of ((?:`[^`]+`|[a-z ]+?)(?:, (?:`[^`]+`|[a-z ]+?))*(?:,? or (?:`[^`]+`|[a-z ]+?))?) is the key itself/,
    'docs/consumers.md',
    problems,
  );
  const digested = found(
    consumers,
    /an `id` of ((?:`[^`]+`|[a-z ]+?)(?:, (?:`[^`]+`|[a-z ]+?))*(?:,? or (?:`[^`]+`|[a-z ]+?))?) gives `record:<(\d+) hex>`/,
    'docs/consumers.md',
    problems,
  );
  const examples = (list: string) => list.split(/, or |, | or /).map((w) => w.trim());
  const recordOf = (word: string) => {
    const { present, value } = exampleId(word);
    return { updated_date: 'never', ...(present ? { id: value } : {}) };
  };
  for (const word of keyed ? examples(keyed[1]!) : []) {
    const key = deadLetterKeyOf(recordOf(word));
    if (key !== String(exampleId(word).value))
      problems.push(`docs/consumers.md: a dead letter with an id of ${word} is keyed ${key}, not by its id`);
  }
  for (const word of digested ? examples(digested[1]!) : []) {
    const key = deadLetterKeyOf(recordOf(word)) ?? '';
    if (!new RegExp(`^record:[0-9a-f]{${digested![2]}}$`).test(key))
      problems.push(
        `docs/consumers.md: a dead letter with an id of ${word} is keyed ${key}, not record:<${digested![2]} hex>`,
      );
  }

  // The rollout strategy: the Kubernetes section names the shipped one, and a doc that names another strategy names
  // the shipped one in the same paragraph (what an upgrade must do differently).
  const strategy = spec.strategy?.type ?? 'RollingUpdate';
  const section = ops.slice(ops.indexOf('The Deployment runs'));
  if (!section.slice(0, 800).includes(`\`${strategy}\``))
    problems.push(`docs/operations.md (Kubernetes) does not name the shipped rollout strategy \`${strategy}\``);
  const unavailable = spec.strategy?.rollingUpdate?.maxUnavailable;
  if (unavailable !== undefined && !section.slice(0, 800).includes(`\`maxUnavailable: ${String(unavailable)}\``))
    problems.push(`docs/operations.md (Kubernetes) does not say maxUnavailable: ${String(unavailable)}`);
  for (const path of ['README.md', 'docs/operations.md', 'docs/exactly-once.md'] as const) {
    for (const paragraph of files[path].split(/\n\s*\n/)) {
      const named = new Set([...paragraph.matchAll(/`(RollingUpdate|Recreate)`/g)].map((m) => m[1]!));
      if ([...named].some((n) => n !== strategy) && !named.has(strategy))
        problems.push(
          `${path}: "${paragraph.slice(0, 60).replace(/\s+/g, ' ')}…" advises a \`${[...named].join('`, `')}\` rollout; the Deployment ships \`${strategy}\``,
        );
    }
  }
  return problems;
}
