import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGREEMENT_FILES, disagreements, type AgreementFiles } from '../../helpers/doc-agreement.js';

// Issue 50: the docs stated numbers and names the manifests and the code did not have (requests 192Mi / limit 512Mi
// against 256Mi / 384Mi, a peak of ~185 MiB against the measured 217, polls every second against a shipped 5000 ms,
// a dead-letter key `record:<16 hex>` for an id the code keys as it is, a `Recreate` upgrade against the shipped
// `RollingUpdate`). The check reads them out of the docs and the parsed manifests and compares; each former
// disagreement, put back into a copy of the files, is named.

const ROOT = normalize(join(dirname(new URL(import.meta.url).pathname), '../../..'));
const files = Object.fromEntries(
  AGREEMENT_FILES.map((path) => [path, readFileSync(join(ROOT, path), 'utf8')]),
) as AgreementFiles;

/** A copy of the files with one text replaced (which must be there). */
function withChange(path: keyof AgreementFiles, from: string | RegExp, to: string): AgreementFiles {
  const text = files[path];
  expect(text).toMatch(from);
  return { ...files, [path]: text.replace(from, to) };
}

describe('docs, manifests, configuration reference and code agree', () => {
  it('on resources, memory figures, the poll interval, defaults, shutdown and key formats', () => {
    expect(disagreements(files).filter((p) => !p.includes('rollout'))).toEqual([]);
  });

  it('on the rollout strategy', () => {
    expect(disagreements(files).filter((p) => p.includes('rollout'))).toEqual([]);
  });

  it.each<[string, keyof AgreementFiles, string | RegExp, string, RegExp]>([
    [
      'resources in the Kubernetes section',
      'docs/operations.md',
      /requests 100m CPU \/ \d+Mi, limit \d+Mi/,
      'requests 100m CPU / 192Mi, limit 512Mi',
      /operations\.md says requests 192Mi \/ limit 512Mi/,
    ],
    [
      "the manifest's peak",
      'deploy/k8s/deployment.yaml',
      /peaks at ~\d+ MiB/,
      'peaks at ~185 MiB',
      /deployment\.yaml's comment says a peak of ~185 MiB/,
    ],
    [
      "the ConfigMap's poll interval",
      'deploy/k8s/configmap.yaml',
      /POLL_INTERVAL_MS: '\d+'/,
      "POLL_INTERVAL_MS: '5000'",
      /configmap\.yaml sets POLL_INTERVAL_MS 5000/,
    ],
    [
      'the dead-letter key of a readable id',
      'docs/consumers.md',
      /`4711` or `abc` is the key itself; an `id` of `a b`/,
      '`4711` is the key itself; an `id` of `abc`, `a b`',
      /id of `abc` is keyed abc, not record:<16 hex>/,
    ],
    [
      'the rollout strategy',
      'deploy/k8s/deployment.yaml',
      /type: Recreate/,
      'type: RollingUpdate',
      /does not name the shipped rollout strategy `RollingUpdate`/,
    ],
    [
      'the resource request in compose',
      'docker-compose.yml',
      /mem_reservation: \w+/,
      'mem_reservation: 192m',
      /compose/,
    ],
    ['a setting name', 'deploy/k8s/configmap.yaml', /POLL_INTERVAL_MS:/, 'POLL_INTERVAL:', /sets POLL_INTERVAL, not/],
    [
      'the grace period',
      'deploy/k8s/deployment.yaml',
      /terminationGracePeriodSeconds: \d+/,
      'terminationGracePeriodSeconds: 20',
      /grace period of 30 s above 25 s, the manifests 20 s/,
    ],
  ])('names a disagreement put back: %s', (_what, path, from, to, named) => {
    const problems = disagreements(withChange(path, from, to));
    expect(
      problems.some((p) => named.test(p)),
      problems.join('\n'),
    ).toBe(true);
  });
});
