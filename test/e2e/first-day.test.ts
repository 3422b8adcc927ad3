import { execFile, execFileSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { testEnv } from '../helpers/bridge.js';
import { ROOT, spawnLogged } from '../helpers/processes.js';
import { pollUntil } from '../helpers/wait.js';

// An operator's first day (issue 40) as they meet it: the `reviews-bridge` command spawned as a process. Bad settings
// all reported in one run, a port in use named by its setting, typos named, the command run from a clone without a
// build, a Node too old refused in one line, and `simulate` stopped by its pid (also through npm) leaving no
// process behind.

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `node bin/reviews-bridge.js ARGS` in `cwd` to completion. */
function bridge(args: string[], env: Record<string, string | undefined> = {}, cwd = ROOT, node = process.execPath) {
  return new Promise<Result>((resolve, reject) => {
    execFile(
      node,
      ['bin/reviews-bridge.js', ...args],
      { cwd, env: { ...process.env, ...env }, timeout: 90_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        if (code === null) reject(new Error(`reviews-bridge ${args.join(' ')}: ${error?.message}\n${stderr}`));
        else resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A fresh clone as `npm ci` leaves it: the sources, bin/ and node_modules, no dist/. */
function cloneWithoutBuild(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rb-clone-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  for (const path of ['bin', 'src', 'package.json', 'package-lock.json', 'tsconfig.json']) {
    cpSync(join(ROOT, path), join(dir, path), { recursive: true });
  }
  symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(dir, 'node_modules'));
  return dir;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pid the simulator logs once it listens (it logs JSON lines). */
function simulatorPid(log: () => string): Promise<number> {
  return pollUntil(
    () => {
      const line = log()
        .split('\n')
        .find((l) => l.includes('"simulator listening"'));
      return line === undefined ? undefined : (JSON.parse(line) as { pid: number }).pid;
    },
    { timeoutMs: 60_000, what: 'the simulator to listen' },
  );
}

function takenPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      cleanups.push(() => server.close());
      resolve({ port: (server.address() as { port: number }).port, server });
    });
  });
}

describe('first day: configuration', () => {
  it('reports three invalid settings in one run, one line each naming it, exit 2', async () => {
    const result = await bridge(['status'], {
      BRIDGE_ACCOUNTS_FILE: '',
      UPSTREAM_BASE_URL: 'ftp://reviews.example.com',
      UPSTREAM_CLIENT_ID: 'id',
      UPSTREAM_CLIENT_SECRET: 'a-secret-value',
      UPSTREAM_PAGE_SIZE: '500',
      KAFKA_BROKERS: 'broker-without-port',
      REDIS_URL: 'redis://127.0.0.1:6379',
      FINGERPRINT_KEY_GENERATE: 'true',
    });
    expect(result.code).toBe(2);
    expect(result.stderr.trimEnd().split('\n')).toEqual([
      'reviews-bridge: invalid configuration: UPSTREAM_BASE_URL: wrong URL scheme ftp://: use http:// or https://',
      expect.stringMatching(/^reviews-bridge: invalid configuration: UPSTREAM_PAGE_SIZE: .*100/),
      'reviews-bridge: invalid configuration: KAFKA_BROKERS: a comma-separated list of host:port',
    ]);
    expect(result.stderr).not.toContain('a-secret-value');
  });

  it('names HTTP_PORT or ADMIN_PORT when its port is in use, in one line, exit 2', async () => {
    const { port } = await takenPort();
    const http = await bridge(['run'], testEnv('http://127.0.0.1:9', { HTTP_PORT: String(port) }));
    expect(http.code).toBe(2);
    expect(http.stderr).toBe(
      `reviews-bridge run: invalid configuration: HTTP_PORT: port ${port} on 127.0.0.1 is already in use by another process\n`,
    );
    const tokens = join(mkdtempSync(join(tmpdir(), 'rb-tokens-')), 'tokens');
    writeFileSync(tokens, 'ops:0123456789abcdef0123456789abcdef\n');
    const admin = await bridge(
      ['run'],
      testEnv('http://127.0.0.1:9', { ADMIN_PORT: String(port), ADMIN_TOKEN_FILE: tokens }),
    );
    expect(admin.code).toBe(2);
    expect(admin.stderr).toBe(
      `reviews-bridge run: invalid configuration: ADMIN_PORT: port ${port} on 127.0.0.1 is already in use by another process\n`,
    );
  });
});

describe('first day: the command line', () => {
  it('refuses unknown arguments and commands, saying what was wrong', async () => {
    const status = await bridge(['status', '--bogus']);
    expect([status.code, status.stderr]).toEqual([
      2,
      'reviews-bridge status: unknown argument "--bogus" (status takes only --account <id>)\n',
    ]);
    const sweep = await bridge(['sweep', '--wiat']);
    expect([sweep.code, sweep.stderr]).toEqual([
      2,
      'reviews-bridge sweep: unknown argument "--wiat" (did you mean --wait?)\n',
    ]);
    const unknown = await bridge(['stauts']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr.split('\n')[0]).toBe('reviews-bridge: unknown command "stauts" (did you mean status?)');
    expect(unknown.stderr).toContain('usage: reviews-bridge <command>');
    const help = await bridge(['resync', '--help']);
    expect([help.code, help.stderr.split('\n')[0]]).toEqual([0, 'usage: reviews-bridge <command>']);
  });

  it('runs from a clone without a build (the sources through tsx), and from dist/ once built and current', async () => {
    const clone = cloneWithoutBuild();
    // As an operator types it: npx finds the project's own bin.
    const help = await new Promise<{ stderr: string }>((resolve, reject) => {
      execFile('npx', ['reviews-bridge', '--help'], { cwd: clone, timeout: 90_000 }, (error, _stdout, stderr) =>
        error ? reject(new Error(`npx reviews-bridge --help: ${error.message}\n${stderr}`)) : resolve({ stderr }),
      );
    });
    expect(help.stderr).toContain('usage: reviews-bridge <command>');
    // A build newer than every source is what runs (a stand-in that says so).
    mkdirSync(join(clone, 'dist/src'), { recursive: true });
    writeFileSync(join(clone, 'dist/src/cli.js'), "process.stdout.write('compiled cli\\n');\n");
    const built = await bridge(['--help'], {}, clone);
    expect(built.stdout).toBe('compiled cli\n');
    // A source edited since the build: the sources run again.
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(clone, 'src/cli.ts'), later, later);
    const edited = await bridge(['--help'], {}, clone);
    expect(edited.stdout).toBe('');
    expect(edited.stderr).toContain('usage: reviews-bridge <command>');
  });

  it('refuses a Node older than engines in one line saying which version and how to get it', async () => {
    const clone = cloneWithoutBuild();
    const manifest = JSON.parse(readFileSync(join(clone, 'package.json'), 'utf8')) as Record<string, unknown>;
    writeFileSync(join(clone, 'package.json'), JSON.stringify({ ...manifest, engines: { node: '>=99.0.0' } }));
    const refused = await bridge(['status'], {}, clone);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      new RegExp(
        `^reviews-bridge: Node 99\\.0\\.0 or newer is needed \\(this is Node ${process.versions.node}\\): .*scripts/node\\.sh.*\\n$`,
      ),
    );
    // A real old Node parses the launcher and gets the same one line (the machine's Node 20, where there is one).
    const old = olderNode();
    if (old !== null) {
      const real = await bridge(['--help'], {}, ROOT, old.path);
      expect(real.code).toBe(1);
      expect(real.stderr).toMatch(
        new RegExp(`^reviews-bridge: Node 22\\.19\\.0 or newer is needed \\(this is Node ${old.version}\\)[^\\n]*\\n$`),
      );
    }
  });
});

// A Node older than package.json's engines on this machine (/usr/bin/node is Node 20 on the project's machines).
function olderNode(): { path: string; version: string } | null {
  for (const path of ['/usr/bin/node', '/usr/local/bin/node']) {
    try {
      const version = execFileSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
      if (Number(version.split('.')[0]) < 22) return { path, version };
    } catch {
      // not there
    }
  }
  return null;
}

describe('first day: simulate', () => {
  it('stopped by its pid, leaves no process behind: run directly and through npm run bridge', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rb-simulate-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    // Directly: the simulator is the process itself (no tsx child), and SIGTERM ends it.
    const direct = spawnLogged(
      process.execPath,
      ['bin/reviews-bridge.js', 'simulate', '--port', '0', '--reviews', '10'],
      {},
      join(dir, 'direct.log'),
    );
    cleanups.push(() => void direct.kill());
    expect(await simulatorPid(direct.log)).toBe(direct.pid);
    expect(await direct.stop()).toEqual({ code: 0, signal: null });

    // Through npm: npm passes SIGTERM to its script's process, which must be the simulator itself.
    const npm = spawnLogged(
      'npm',
      ['run', 'bridge', '--', 'simulate', '--port', '0', '--reviews', '10'],
      {},
      join(dir, 'npm.log'),
    );
    cleanups.push(() => void npm.kill());
    const pid = await simulatorPid(npm.log);
    cleanups.push(() => {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    });
    npm.signal('SIGTERM');
    await npm.exited;
    await pollUntil(() => (alive(pid) ? undefined : true), {
      timeoutMs: 20_000,
      what: `the simulator (pid ${pid}) to end after npm (pid ${npm.pid}) was stopped`,
    });
  });
});
