import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml, parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { ENV_VARS, EnvSchema } from '../../../src/config/config.js';
import { AccountsFileSchema, PER_ACCOUNT_SETTINGS } from '../../../src/config/accounts.js';

// The container image, the compose stack and the Kubernetes manifests cannot run here (no Docker engine, no
// cluster), so this checks what can be checked statically: they parse, every file they reference exists, images
// are pinned, and every environment variable they set is one the bridge reads and accepts.

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const read = (p: string): string => readFileSync(join(ROOT, p), 'utf8');
const KNOWN_ENV = new Set(ENV_VARS);
const BRIDGE_IMAGE = 'reviews-bridge';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const obj = (v: unknown, what: string): Obj => {
  if (!isObj(v)) throw new Error(`${what} is not a mapping`);
  return v;
};
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

function walk(dir: string): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs).flatMap((name) => {
    const rel = posix.join(dir, name);
    return statSync(join(ROOT, rel)).isDirectory() ? walk(rel) : [rel];
  });
}

/** A full version tag ("3.9.1", "v3.5.0", "7.4.2-alpine", "24.21.0-bookworm-slim") or a digest; never latest. */
function pinnedImage(image: string): boolean {
  const m = /^(?<name>[a-z0-9][\w./-]*?)(?::(?<tag>[\w.-]+))?(?:@sha256:[a-f0-9]{64})?$/.exec(image);
  if (!m?.groups) return false;
  if (image.includes('@sha256:')) return true;
  const tag = m.groups.tag;
  return tag !== undefined && tag !== 'latest' && /^v?\d+\.\d+\.\d+/.test(tag);
}

// ---------------------------------------------------------------- generic

describe('deployment files parse', () => {
  const yamlFiles = ['docker-compose.yml', ...walk('deploy').filter((f) => /\.ya?ml$/.test(f))];

  it.each(yamlFiles)('%s is valid YAML', (file) => {
    const docs = parseAllDocuments(read(file), { merge: true });
    const list = Array.isArray(docs) ? docs : [docs];
    expect(list.length).toBeGreaterThan(0);
    for (const d of list) expect(d.errors.map((e) => e.message)).toEqual([]);
  });

  it('the dashboard is valid JSON with panels and a datasource variable', () => {
    const d = obj(JSON.parse(read('deploy/grafana/dashboards/reviews-bridge.json')), 'dashboard');
    expect(d.uid).toBe('reviews-bridge');
    expect(arr(d.panels).length).toBeGreaterThan(10);
    const vars = arr(obj(d.templating, 'templating').list).map((v) => obj(v, 'variable').name);
    expect(vars).toEqual(expect.arrayContaining(['datasource', 'account']));
  });

  it('dashboard panels have unique ids, fit the 24-column grid and do not overlap', () => {
    const d = obj(JSON.parse(read('deploy/grafana/dashboards/reviews-bridge.json')), 'dashboard');
    const panels = arr(d.panels).map((p) => obj(p, 'panel'));
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const boxes = panels.map((p) => {
      const g = obj(p.gridPos, `gridPos of ${String(p.title)}`) as { x: number; y: number; w: number; h: number };
      expect(g.x + g.w, String(p.title)).toBeLessThanOrEqual(24);
      return { title: String(p.title), ...g };
    });
    for (const [i, a] of boxes.entries()) {
      for (const b of boxes.slice(i + 1)) {
        const overlap = a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
        expect(overlap, `${a.title} overlaps ${b.title}`).toBe(false);
      }
    }
    // Every query panel reads from the datasource variable, so the dashboard works with any Prometheus.
    for (const p of panels.filter((x) => x.type !== 'row')) {
      expect(obj(p.datasource, 'datasource').uid, String(p.title)).toBe('${datasource}');
    }
  });
});

// ---------------------------------------------------------------- Dockerfile

interface DockerInstruction {
  op: string;
  args: string;
}

function dockerfile(): DockerInstruction[] {
  const joined = read('Dockerfile').replace(/\\\n/g, ' ');
  return joined
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const [op = '', ...rest] = l.split(/\s+/);
      return { op: op.toUpperCase(), args: rest.join(' ') };
    });
}

/** .dockerignore semantics (last matching pattern wins, `!` re-includes), enough for the patterns used here. */
function dockerIgnored(path: string): boolean {
  const patterns = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
  let ignored = false;
  for (const p of patterns) {
    const negate = p.startsWith('!');
    const glob = (negate ? p.slice(1) : p).replace(/^\/+/, '').replace(/\/+$/, '');
    const re = new RegExp(
      '^' +
        glob
          .split(/(\*\*\/?|\*|\?)/)
          .map((part) =>
            part === '**' || part === '**/'
              ? '.*'
              : part === '*'
                ? '[^/]*'
                : part === '?'
                  ? '[^/]'
                  : part.replace(/[.+^${}()|[\]\\]/g, '\\$&'),
          )
          .join('') +
        '(/.*)?$',
    );
    if (re.test(path)) ignored = !negate;
  }
  return ignored;
}

describe('Dockerfile', () => {
  const ins = dockerfile();
  const args = new Map(
    ins
      .filter((i) => i.op === 'ARG' && i.args.includes('='))
      .map((i) => {
        const [k = '', ...v] = i.args.split('=');
        return [k, v.join('=')] as const;
      }),
  );
  const froms = ins.filter((i) => i.op === 'FROM');
  const resolve = (s: string): string => s.replace(/\$\{?(\w+)\}?/g, (_, k: string) => args.get(k) ?? `$${k}`);

  it('is multi-stage on a pinned node 24 bookworm-slim base, the Node version the tests run on', () => {
    // scripts/node.sh fetches this version for npm test and the demo; the image must ship the same one.
    const testedNode = /^NODE24_VERSION=(\d+\.\d+\.\d+)$/m.exec(read('scripts/node.sh'))?.[1];
    expect(testedNode).toMatch(/^24\./);
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const f of froms) {
      const image = resolve(f.args.split(/\s+/)[0] ?? '');
      expect(image, f.args).toMatch(/^node:24\.\d+\.\d+-bookworm-slim(@sha256:[a-f0-9]{64})?$/);
      expect(image.startsWith(`node:${testedNode}-`), f.args).toBe(true);
      expect(pinnedImage(image)).toBe(true);
    }
  });

  it('builds with npm ci and npm run build, and ships production dependencies only', () => {
    const runs = ins.filter((i) => i.op === 'RUN').map((i) => i.args);
    expect(runs.some((r) => /npm ci\b/.test(r) && !r.includes('--omit=dev'))).toBe(true);
    expect(runs.some((r) => r.includes('npm run build'))).toBe(true);
    expect(runs.some((r) => /npm ci\b.*--omit=dev/.test(r))).toBe(true);
    const pkg = JSON.parse(read('package.json')) as { scripts?: Record<string, string> };
    const build = pkg.scripts?.build ?? '';
    expect(build).toMatch(/^tsc -p tsconfig\.build\.json\b/);
    // tsc emits only JavaScript: files the code reads beside its modules (src/redis/lua/*.lua) must be copied by the
    // build script or by the Dockerfile, or the image fails at run time.
    const assetDirs = new Set(
      walk('src')
        .filter((f) => !f.endsWith('.ts'))
        .map((f) => posix.dirname(f)),
    );
    for (const dir of assetDirs) {
      const copied = build.includes(dir) || runs.some((r) => r.includes(dir) && r.includes('dist/'));
      expect(copied, `${dir} is not copied into dist/`).toBe(true);
    }
  });

  it('runs dist/src/cli.js as the non-root node user with a health check and the ops port', () => {
    const last = (op: string): string => ins.filter((i) => i.op === op).at(-1)?.args ?? '';
    expect(JSON.parse(last('ENTRYPOINT'))).toEqual(['node', 'dist/src/cli.js']);
    expect(JSON.parse(last('CMD'))).toEqual(['run']);
    expect(last('USER')).toBe('node');
    expect(last('EXPOSE')).toBe('9464');
    expect(last('HEALTHCHECK')).toMatch(/\/healthz/);
    // The entry point is what tsc emits for src/cli.ts with rootDir "." and outDir "dist".
    expect(existsSync(join(ROOT, 'src/cli.ts'))).toBe(true);
  });

  it('copies every package patched under patches/ from the build stage (the runtime install runs no scripts)', () => {
    const patched = readdirSync(join(ROOT, 'patches'))
      .filter((f) => f.endsWith('.patch'))
      .map((f) => f.replace(/\+[^+]+\.patch$/, '').replace('+', '/'));
    expect(patched).toContain('kafkajs');
    const fromBuild = ins.filter((i) => i.op === 'COPY' && /--from=build\b/.test(i.args)).map((i) => i.args);
    for (const pkg of patched) {
      expect(
        fromBuild.some((args) => args.includes(`/app/node_modules/${pkg} ./node_modules/${pkg}`)),
        pkg,
      ).toBe(true);
    }
  });

  it('every COPY source exists and is not excluded by .dockerignore', () => {
    const copies = ins.filter((i) => (i.op === 'COPY' || i.op === 'ADD') && !/--from=/.test(i.args));
    expect(copies.length).toBeGreaterThan(0);
    for (const c of copies) {
      const parts = c.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) {
        const abs = join(ROOT, src);
        expect(existsSync(abs), `COPY source ${src}`).toBe(true);
        const files = statSync(abs).isDirectory() ? walk(src) : [src];
        expect(files.length, `COPY source ${src} is empty`).toBeGreaterThan(0);
        for (const f of files) expect(dockerIgnored(f), `${f} is excluded by .dockerignore`).toBe(false);
      }
    }
  });

  it('.dockerignore keeps secrets, tests and local state out of the build context', () => {
    for (const p of [
      'node_modules/x',
      'dist/src/cli.js',
      '.git/config',
      'deploy/compose/secrets/upstream_client_id',
      'test/unit/x.test.ts',
      '.cache/x',
      '.run/x',
    ]) {
      expect(dockerIgnored(p), p).toBe(true);
    }
    expect(dockerIgnored('src/cli.ts')).toBe(false);
  });
});

// ---------------------------------------------------------------- docker-compose.yml

describe('docker-compose.yml', () => {
  const compose = obj(parseYaml(read('docker-compose.yml'), { merge: true }), 'compose');
  const services = obj(compose.services, 'services');
  const svc = (name: string): Obj => obj(services[name], `service ${name}`);
  const isBridgeImage = (s: Obj): boolean => String(s.image ?? '').split(':')[0] === BRIDGE_IMAGE || 'build' in s;
  const bridgeRuns = Object.entries(services).filter(
    ([, s]) => isObj(s) && isBridgeImage(s) && arr(s.command)[0] === 'run',
  );
  const envOf = (s: Obj): Record<string, string> => {
    const e = s.environment;
    if (Array.isArray(e)) {
      return Object.fromEntries(
        e.map((kv) => {
          const [k = '', ...v] = String(kv).split('=');
          return [k, v.join('=')];
        }),
      );
    }
    return Object.fromEntries(Object.entries(isObj(e) ? e : {}).map(([k, v]) => [k, String(v)]));
  };

  it('has the expected services', () => {
    expect(Object.keys(services)).toEqual(
      expect.arrayContaining(['kafka', 'redis', 'simulator', 'bridge', 'prometheus', 'grafana']),
    );
    expect(svc('kafka').image).toBe('apache/kafka:4.2.2');
    expect(String(svc('redis').image)).toMatch(/^redis:7\.4\.\d+-alpine$/);
    expect(String(svc('prometheus').image)).toMatch(/^prom\/prometheus:v3\.\d+\.\d+$/);
    expect(String(svc('grafana').image)).toMatch(/^grafana\/grafana:11\.\d+\.\d+$/);
    expect(bridgeRuns.length).toBeGreaterThanOrEqual(1);
  });

  it('runs the schema registry the tests run (pinned), and the bridges register there before they start', () => {
    const pom = read('scripts/registry/pom.xml');
    const version = /<registry\.version>(.+)<\/registry\.version>/.exec(pom)?.[1];
    expect(svc('registry').image).toBe(`apicurio/apicurio-registry:${version}`);
    for (const [name, s] of bridgeRuns) {
      const url = new URL(envOf(obj(s, name)).SCHEMA_REGISTRY_URL ?? '');
      expect(url.host, name).toBe('registry:8080');
      expect(url.pathname, name).toBe('/apis/ccompat/v7');
      expect(obj(obj(s, name).depends_on, 'depends_on').registry, name).toEqual({ condition: 'service_healthy' });
    }
  });

  it('publishes ports on 127.0.0.1 only (the demo has no authentication)', () => {
    const published = Object.entries(services).flatMap(([name, s]) =>
      arr(obj(s, name).ports ?? []).map((p) => [name, String(p)] as const),
    );
    expect(published.length).toBeGreaterThan(0);
    for (const [name, port] of published) expect(port, `service ${name}`).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
  });

  it('pins every image to an explicit version', () => {
    for (const [name, s] of Object.entries(services)) {
      const image = String(obj(s, name).image ?? '');
      expect(image, `service ${name} has no image`).not.toBe('');
      expect(pinnedImage(image), `service ${name}: ${image}`).toBe(true);
    }
  });

  it('every referenced file exists (build contexts, bind mounts, secrets)', () => {
    for (const [name, s] of Object.entries(services)) {
      const service = obj(s, name);
      if (service.build !== undefined) {
        const ctx = typeof service.build === 'string' ? service.build : String(obj(service.build, 'build').context);
        const dockerfileName =
          isObj(service.build) && service.build.dockerfile ? String(service.build.dockerfile) : 'Dockerfile';
        expect(existsSync(join(ROOT, ctx, dockerfileName)), `${name}: build ${ctx}`).toBe(true);
      }
      for (const v of arr(service.volumes)) {
        const source = typeof v === 'string' ? v.split(':')[0] : String(obj(v, 'volume').source);
        if (source?.startsWith('.') || source?.startsWith('/')) {
          expect(existsSync(join(ROOT, source)), `${name}: volume ${source}`).toBe(true);
        } else {
          expect(Object.keys(obj(compose.volumes ?? {}, 'volumes')), `${name}: named volume ${source}`).toContain(
            source,
          );
        }
      }
      for (const f of arr(service.env_file))
        expect(existsSync(join(ROOT, String(f))), `${name}: env_file ${f}`).toBe(true);
    }
    for (const [name, s] of Object.entries(obj(compose.secrets ?? {}, 'secrets'))) {
      const file = String(obj(s, name).file);
      expect(existsSync(join(ROOT, file)), `secret ${name}: ${file}`).toBe(true);
    }
  });

  it('the bridge services only set variables the bridge reads, with values it accepts', () => {
    for (const [name, s] of bridgeRuns) {
      const env = envOf(obj(s, name));
      for (const key of Object.keys(env))
        expect(KNOWN_ENV.has(key), `${name}: ${key} is not read by the bridge`).toBe(true);
      const parsed = EnvSchema.safeParse(env);
      expect(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`), name).toEqual(
        [],
      );
    }
  });

  it('leaves the admin API off (an example is commented)', () => {
    for (const [name, s] of bridgeRuns) expect(envOf(obj(s, name)).ADMIN_PORT, name).toBeUndefined();
    expect(read('docker-compose.yml')).toMatch(/^\s*#\s*ADMIN_PORT:/m);
  });

  it('credentials come from compose secrets through the *_FILE variables', () => {
    for (const [name, s] of bridgeRuns) {
      const service = obj(s, name);
      const env = envOf(service);
      expect(env.UPSTREAM_CLIENT_ID, name).toBeUndefined();
      expect(env.UPSTREAM_CLIENT_SECRET, name).toBeUndefined();
      const mounted = arr(service.secrets).map(
        (x) => `/run/secrets/${typeof x === 'string' ? x : String(obj(x, 'secret').target ?? obj(x, 'secret').source)}`,
      );
      expect(mounted).toContain(env.UPSTREAM_CLIENT_ID_FILE);
      expect(mounted).toContain(env.UPSTREAM_CLIENT_SECRET_FILE);
    }
  });

  it('the simulator runs from the same image and is reachable at UPSTREAM_BASE_URL', () => {
    const sim = svc('simulator');
    expect(String(sim.image).split(':')[0]).toBe(BRIDGE_IMAGE);
    const cmd = arr(sim.command).map(String);
    expect(cmd[0]).toBe('simulate');
    const flag = (f: string): string | undefined => cmd[cmd.indexOf(f) + 1];
    expect(flag('--reviews')).toBe('10000');
    // Inside a container the simulator must not listen on loopback only.
    expect(flag('--host')).toBe('0.0.0.0');
    for (const [name, s] of bridgeRuns) {
      const url = new URL(envOf(obj(s, name)).UPSTREAM_BASE_URL ?? '');
      expect(url.hostname).toBe('simulator');
      expect(url.port).toBe(flag('--port'));
    }
  });

  it('Prometheus gets its config and rules at the paths the config names, and scrapes every bridge service', () => {
    const prom = svc('prometheus');
    const mounts = new Map(
      arr(prom.volumes)
        .map(String)
        .map((v) => v.split(':'))
        .map(([src = '', dst = '']) => [dst, src] as const),
    );
    expect(mounts.get('/etc/prometheus/prometheus.yml')).toBe('./deploy/prometheus/prometheus.yml');
    const config = obj(parseYaml(read('deploy/prometheus/prometheus.yml')), 'prometheus.yml');
    for (const rule of arr(config.rule_files).map(String)) {
      const inContainer = posix.resolve('/etc/prometheus', rule);
      const source = mounts.get(inContainer);
      expect(source, `rule file ${inContainer} is not mounted`).toBeDefined();
      expect(existsSync(join(ROOT, source ?? ''))).toBe(true);
    }
    const job = arr(config.scrape_configs)
      .map((j) => obj(j, 'job'))
      .find((j) => j.job_name === 'reviews-bridge');
    const sd = obj(arr(job?.dns_sd_configs)[0], 'dns_sd_configs');
    for (const [name, s] of bridgeRuns) {
      expect(arr(sd.names), `service ${name} is not scraped`).toContain(name);
      expect(String(sd.port)).toBe(envOf(obj(s, name)).HTTP_PORT ?? '9464');
    }
  });

  it('Grafana provisioning points at the mounted dashboards and the Prometheus service', () => {
    const mounts = new Map(
      arr(svc('grafana').volumes)
        .map(String)
        .map((v) => v.split(':'))
        .map(([src = '', dst = '']) => [src.replace(/^\.\//, ''), dst] as const),
    );
    const provider = obj(
      arr(obj(parseYaml(read('deploy/grafana/provisioning/dashboards/reviews-bridge.yml')), 'provider').providers)[0],
      'provider',
    );
    expect(obj(provider.options, 'options').path).toBe(mounts.get('deploy/grafana/dashboards'));
    expect(mounts.get('deploy/grafana/provisioning/datasources')).toBe('/etc/grafana/provisioning/datasources');
    expect(mounts.get('deploy/grafana/provisioning/dashboards')).toBe('/etc/grafana/provisioning/dashboards');
    const ds = obj(
      arr(obj(parseYaml(read('deploy/grafana/provisioning/datasources/prometheus.yml')), 'ds').datasources)[0],
      'ds',
    );
    expect(ds.type).toBe('prometheus');
    expect(ds.url).toBe('http://prometheus:9090');
  });
});

// ---------------------------------------------------------------- Kubernetes

const ACCOUNTS_CONFIGMAP = 'reviews-bridge-accounts';

describe('Kubernetes manifests', () => {
  const files = walk('deploy/k8s').filter((f) => /\.ya?ml$/.test(f) && !f.endsWith('kustomization.yaml'));
  const docs = files.flatMap((f) =>
    parseAllDocuments(read(f))
      .map((d) => d.toJS() as unknown)
      .filter(isObj)
      .map((d) => ({ file: f, doc: d })),
  );
  const byKind = (kind: string): Obj[] => docs.filter((d) => d.doc.kind === kind).map((d) => d.doc);
  const one = (kind: string): Obj => {
    const found = byKind(kind);
    expect(found.length, kind).toBe(1);
    return found[0] as Obj;
  };
  const deployment = one('Deployment');
  const podSpec = obj(obj(obj(deployment.spec, 'spec').template, 'template').spec, 'pod spec');
  const containers = arr(podSpec.containers).map((c) => obj(c, 'container'));
  const bridge = containers[0] as Obj;
  const podLabels = obj(
    obj(obj(obj(deployment.spec, 'spec').template, 'template').metadata, 'metadata').labels,
    'labels',
  );
  const configMaps = new Map(byKind('ConfigMap').map((c) => [String(obj(c.metadata, 'metadata').name), c]));

  const containerEnv = (): Record<string, string> => {
    const env: Record<string, string> = {};
    for (const from of arr(bridge.envFrom)) {
      const ref = obj(obj(from, 'envFrom').configMapRef, 'configMapRef');
      const cm = configMaps.get(String(ref.name));
      expect(cm, `ConfigMap ${String(ref.name)}`).toBeDefined();
      for (const [k, v] of Object.entries(obj(cm?.data ?? {}, 'data'))) env[k] = String(v);
    }
    for (const e of arr(bridge.env)) {
      const item = obj(e, 'env');
      env[String(item.name)] = item.value === undefined ? '<from reference>' : String(item.value);
    }
    return env;
  };

  it('the accounts example is a valid accounts file whose secrets come from files', () => {
    const cm = configMaps.get(ACCOUNTS_CONFIGMAP);
    expect(cm).toBeDefined();
    const parsed = AccountsFileSchema.safeParse(parseYaml(String(obj(cm!.data, 'data')['accounts.yaml'])));
    expect(parsed.success ? [] : parsed.error.issues).toEqual([]);
    for (const account of parsed.data?.accounts ?? []) {
      expect(account.upstream.clientSecretFile).toMatch(/^\/var\/run\/secrets\//);
      for (const name of Object.keys(account.settings ?? {})) expect(PER_ACCOUNT_SETTINGS).toContain(name);
    }
  });

  it('kustomization lists existing files', () => {
    const k = obj(parseYaml(read('deploy/k8s/kustomization.yaml')), 'kustomization');
    for (const r of arr(k.resources)) expect(existsSync(join(ROOT, 'deploy/k8s', String(r))), String(r)).toBe(true);
  });

  it('Deployment: 2 replicas, probes on /healthz and /readyz, resources, non-root, pinned image', () => {
    expect(obj(deployment.spec, 'spec').replicas).toBe(2);
    const port = obj(arr(bridge.ports)[0], 'port');
    const probePath = (p: string): unknown => obj(obj(bridge[p], p).httpGet, `${p}.httpGet`).path;
    expect(probePath('livenessProbe')).toBe('/healthz');
    expect(probePath('readinessProbe')).toBe('/readyz');
    for (const p of ['livenessProbe', 'readinessProbe']) {
      expect(obj(obj(bridge[p], p).httpGet, 'httpGet').port).toBe(port.name);
    }
    const resources = obj(bridge.resources, 'resources');
    expect(obj(resources.requests, 'requests')).toHaveProperty('memory');
    expect(obj(resources.requests, 'requests')).toHaveProperty('cpu');
    expect(obj(resources.limits, 'limits')).toHaveProperty('memory');
    expect(obj(podSpec.securityContext, 'securityContext').runAsNonRoot).toBe(true);
    expect(obj(bridge.securityContext, 'securityContext').readOnlyRootFilesystem).toBe(true);
    for (const c of containers) expect(pinnedImage(String(c.image)), String(c.image)).toBe(true);
    expect(arr(bridge.args)).toEqual(['run']);
  });

  it('every environment variable set is one the bridge reads, and the whole set is valid', () => {
    const env = containerEnv();
    for (const key of Object.keys(env)) expect(KNOWN_ENV.has(key), `${key} is not read by the bridge`).toBe(true);
    for (const [name, cm] of configMaps) {
      if (name === ACCOUNTS_CONFIGMAP) continue; // a file, checked below
      for (const key of Object.keys(obj(cm.data ?? {}, 'data')))
        expect(KNOWN_ENV.has(key), `ConfigMap key ${key}`).toBe(true);
    }
    const parsed = EnvSchema.safeParse(env);
    expect(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual([]);
    expect(env.HTTP_PORT).toBe(String(obj(arr(bridge.ports)[0], 'port').containerPort));
    // The bridge must finish its shutdown before the kubelet's SIGKILL.
    expect(Number(env.SHUTDOWN_TIMEOUT_MS)).toBeLessThan(Number(podSpec.terminationGracePeriodSeconds) * 1000);
  });

  it('credentials are Secret-mounted files read through the *_FILE variables', () => {
    const env = containerEnv();
    const mounts = arr(bridge.volumeMounts).map((m) => obj(m, 'volumeMount'));
    const volumes = new Map(arr(podSpec.volumes).map((v) => [String(obj(v, 'volume').name), obj(v, 'volume')]));
    const fileVars = Object.keys(env).filter((k) => k.endsWith('_FILE'));
    for (const key of [
      'UPSTREAM_CLIENT_ID_FILE',
      'UPSTREAM_CLIENT_SECRET_FILE',
      'KAFKA_SASL_PASSWORD_FILE',
      'REDIS_PASSWORD_FILE',
      'EVENT_HASH_KEY_FILE',
      'ADMIN_TOKEN_FILE',
    ]) {
      expect(fileVars).toContain(key);
    }
    for (const key of fileVars) {
      const path = env[key] ?? '';
      const mount = mounts.find((m) => path.startsWith(`${String(m.mountPath)}/`));
      expect(mount, `${key}=${path} is not under a volume mount`).toBeDefined();
      const secret = obj(volumes.get(String(mount?.name))?.secret, `${key}: secret volume`);
      const items = arr(secret.items).map((i) => String(obj(i, 'item').path));
      expect(items).toContain(posix.relative(String(mount?.mountPath), path));
    }
  });

  it('nothing secret in the ConfigMap or the plain environment', () => {
    const env = containerEnv();
    for (const key of ['UPSTREAM_CLIENT_ID', 'UPSTREAM_CLIENT_SECRET', 'KAFKA_SASL_PASSWORD', 'REDIS_PASSWORD']) {
      expect(env[key], key).toBeUndefined();
    }
    for (const cm of configMaps.values()) {
      for (const [key, value] of Object.entries(obj(cm.data ?? {}, 'data'))) {
        expect(key, 'a secret-looking key in the ConfigMap').not.toMatch(/PASSWORD$|SECRET$|TOKEN|HASH_KEY$/);
        expect(String(value), `${key} carries credentials`).not.toMatch(/:\/\/[^/\s]*@/);
      }
    }
    // Transport: TLS to Kafka and Redis, https upstream, no plaintext SASL.
    expect(env.KAFKA_SSL).toBe('true');
    expect(env.KAFKA_SASL_ALLOW_PLAINTEXT ?? 'false').toBe('false');
    expect(env.REDIS_URL).toMatch(/^rediss:\/\//);
    expect(env.UPSTREAM_BASE_URL).toMatch(/^https:\/\//);
    expect(env.UPSTREAM_ALLOW_INSECURE ?? 'false').toBe('false');
    expect(env.EVENT_FIELDS_ALLOW_RAW_EMAIL ?? 'false').toBe('false');
  });

  it('the namespace enforces the restricted Pod Security profile, which the pods meet', () => {
    const labels = obj(obj(one('Namespace').metadata, 'metadata').labels, 'namespace labels');
    for (const mode of ['enforce', 'audit', 'warn'])
      expect(labels[`pod-security.kubernetes.io/${mode}`]).toBe('restricted');
    const pod = obj(podSpec.securityContext, 'securityContext');
    expect(pod.runAsNonRoot).toBe(true);
    expect(obj(pod.seccompProfile, 'seccompProfile').type).toBe('RuntimeDefault');
    for (const c of containers) {
      const sc = obj(c.securityContext, 'container securityContext');
      expect(sc.allowPrivilegeEscalation).toBe(false);
      expect(arr(obj(sc.capabilities, 'capabilities').drop)).toEqual(['ALL']);
    }
    expect(podSpec.automountServiceAccountToken).toBe(false);
  });

  it('the NetworkPolicy admits only the metrics port and lets out only DNS, Kafka, Redis and HTTPS', () => {
    const policy = one('NetworkPolicy');
    const spec = obj(policy.spec, 'spec');
    for (const [k, v] of Object.entries(obj(obj(spec.podSelector, 'podSelector').matchLabels, 'matchLabels'))) {
      expect(podLabels[k], k).toBe(v);
    }
    expect(arr(spec.policyTypes)).toEqual(['Ingress', 'Egress']);
    const metricsPort = obj(arr(bridge.ports)[0], 'port').containerPort;
    // Open to any source: the metrics port only (the admin port has a rule of its own, checked below).
    const ingressPorts = arr(spec.ingress)
      .filter((r) => obj(r, 'ingress rule').from === undefined)
      .flatMap((r) => arr(obj(r, 'ingress rule').ports).map((p) => obj(p, 'port').port));
    expect(ingressPorts).toEqual([metricsPort]);
    const egressPorts = arr(spec.egress).flatMap((r) => {
      const rule = obj(r, 'egress rule');
      expect(arr(rule.to).length, 'an egress rule without destinations allows everything').toBeGreaterThan(0);
      return arr(rule.ports).map((p) => Number(obj(p, 'port').port));
    });
    const port = (url: string, fallback: number) => Number(new URL(url).port || fallback);
    const env = containerEnv();
    expect(new Set(egressPorts)).toEqual(
      new Set([
        53,
        ...(env.KAFKA_BROKERS ?? '').split(',').map((b) => Number(b.split(':')[1])),
        port(env.REDIS_URL ?? '', 6379),
        port(env.UPSTREAM_BASE_URL ?? '', 443),
      ]),
    );
  });

  it('the admin API is exposed on purpose only: own port and Service, labelled callers, tokens from a Secret', () => {
    const env = containerEnv();
    const ports = arr(bridge.ports).map((p) => obj(p, 'port'));
    const adminPort = ports.find((p) => p.name === 'http-admin');
    expect(adminPort, 'a container port named http-admin').toBeDefined();
    expect(String(adminPort!.containerPort)).toBe(env.ADMIN_PORT);
    expect(env.ADMIN_PORT).not.toBe(env.HTTP_PORT);
    // Its own Service, which the ServiceMonitor does not select, and the metrics Service does not carry the port.
    const services = byKind('Service');
    expect(services).toHaveLength(2);
    const admin = services.find((x) => obj(x.metadata, 'metadata').name === 'reviews-bridge-admin');
    expect(admin).toBeDefined();
    const adminSpec = obj(admin!.spec, 'spec');
    expect(arr(adminSpec.ports).map((p) => obj(p, 'port').targetPort)).toEqual(['http-admin']);
    for (const [k, v] of Object.entries(obj(adminSpec.selector, 'selector'))) expect(podLabels[k], k).toBe(v);
    const metricsService = services.find((x) => x !== admin)!;
    expect(arr(obj(metricsService.spec, 'spec').ports).map((p) => obj(p, 'port').targetPort)).not.toContain(
      'http-admin',
    );
    const smSelector = obj(obj(obj(one('ServiceMonitor').spec, 'spec').selector, 'selector').matchLabels, 'labels');
    const adminLabels = obj(obj(admin!.metadata, 'metadata').labels, 'labels');
    expect(Object.entries(smSelector).every(([k, v]) => adminLabels[k] === v)).toBe(false);
    // The NetworkPolicy admits the admin port only from pods with a specific label, nothing else.
    const rules = arr(obj(one('NetworkPolicy').spec, 'spec').ingress).map((r) => obj(r, 'ingress rule'));
    const adminRules = rules.filter((r) => arr(r.ports).some((p) => obj(p, 'port').port === adminPort!.containerPort));
    expect(adminRules).toHaveLength(1);
    const from = arr(adminRules[0]!.from).map((f) => obj(f, 'peer'));
    expect(from.length).toBeGreaterThan(0);
    for (const peer of from) {
      expect(Object.keys(peer)).toEqual(['podSelector']);
      const labels = obj(obj(peer.podSelector, 'podSelector').matchLabels, 'matchLabels');
      expect(Object.keys(labels).length, 'an empty selector admits every pod').toBeGreaterThan(0);
      for (const key of Object.keys(labels))
        expect(podLabels[key], 'the bridge pods must not admit themselves').toBeUndefined();
    }
    expect(arr(adminRules[0]!.ports).map((p) => obj(p, 'port').port)).toEqual([adminPort!.containerPort]);
    // The tokens are a Secret mounted as a file (the credentials test checks every *_FILE the same way).
    expect(env.ADMIN_TOKEN_FILE).toMatch(/^\/var\/run\/secrets\//);
  });

  it('Service, ServiceMonitor and PodDisruptionBudget select the bridge pods and port', () => {
    const service = byKind('Service').find((x) => obj(x.metadata, 'metadata').name === 'reviews-bridge')!;
    const selector = obj(obj(service.spec, 'spec').selector, 'selector');
    for (const [k, v] of Object.entries(selector)) expect(podLabels[k], k).toBe(v);
    const portName = obj(arr(obj(service.spec, 'spec').ports)[0], 'port').targetPort;
    expect(arr(bridge.ports).map((p) => obj(p, 'port').name)).toContain(portName);

    const sm = one('ServiceMonitor');
    const smSelector = obj(obj(obj(sm.spec, 'spec').selector, 'selector').matchLabels, 'matchLabels');
    const serviceLabels = obj(obj(service.metadata, 'metadata').labels, 'labels');
    for (const [k, v] of Object.entries(smSelector)) expect(serviceLabels[k], k).toBe(v);
    const endpoint = obj(arr(obj(sm.spec, 'spec').endpoints)[0], 'endpoint');
    expect(endpoint.path).toBe('/metrics');
    expect(arr(obj(service.spec, 'spec').ports).map((p) => obj(p, 'port').name)).toContain(endpoint.port);

    const pdb = one('PodDisruptionBudget');
    for (const [k, v] of Object.entries(obj(obj(obj(pdb.spec, 'spec').selector, 'selector').matchLabels, 'labels'))) {
      expect(podLabels[k], k).toBe(v);
    }
  });

  it('the PrometheusRule carries exactly the tested alert rules of deploy/prometheus/alerts.yml', () => {
    const alerts = read('deploy/prometheus/alerts.yml');
    if (process.env.UPDATE_GENERATED === '1') writeFileSync(join(ROOT, PROMETHEUS_RULE), renderPrometheusRule(alerts));
    const rule = obj(parseYaml(read(PROMETHEUS_RULE)), PROMETHEUS_RULE);
    expect(rule.kind).toBe('PrometheusRule');
    // Compared as data, so that the file may be re-formatted (prettier) without failing.
    expect(
      obj(rule.spec, 'spec').groups,
      `regenerate with: UPDATE_GENERATED=1 npx vitest run --project unit ${relative(ROOT, fileURLToPath(import.meta.url))}`,
    ).toEqual(obj(parseYaml(alerts), 'alerts.yml').groups);
  });
});

const PROMETHEUS_RULE = 'deploy/k8s/prometheusrule.yaml';

// The operator resource is generated from alerts.yml so that the promtool-tested rules are what the cluster runs.
function renderPrometheusRule(alertsYaml: string): string {
  const rules = obj(parseYaml(alertsYaml), 'alerts.yml');
  const doc = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'reviews-bridge', labels: { 'app.kubernetes.io/name': 'reviews-bridge' } },
    spec: { groups: rules.groups },
  };
  return (
    '# GENERATED from deploy/prometheus/alerts.yml (the promtool-tested source): edit that file, then run\n' +
    '#   UPDATE_GENERATED=1 npx vitest run --project unit test/unit/deploy/packaging.test.ts\n' +
    '#   npx prettier --write deploy/k8s/prometheusrule.yaml\n' +
    '# The same rule groups as a Prometheus Operator resource.\n' +
    stringifyYaml(doc, { lineWidth: 0 })
  );
}
