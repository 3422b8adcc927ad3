import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { pollUntil } from './wait.js';

// Processes the fault suite starts and kills: the bridge CLI as a child process (logs to a file, SIGKILL at will),
// and private Kafka/Redis servers on their own ports so that stopping them never disturbs the shared ones.
// Every process is addressed by its pid; nothing here kills by name.

/** Root of the repository (cwd of every child). */
export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Directory for the fault suite's logs and private data (under .run/, git-ignored). */
export function runDir(name: string): string {
  const dir = `${ROOT}.run/faults/${name}`;
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** How a child ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A child process whose stdout and stderr go to a log file. */
export interface Child {
  readonly pid: number;
  readonly logFile: string;
  /** Resolves when the process has exited (also when it was killed). */
  readonly exited: Promise<Exit>;
  /** True once the process has exited. */
  readonly alive: boolean;
  /** Sends a signal; a no-op after exit. */
  signal(signal: NodeJS.Signals): void;
  /** SIGKILL and wait for the exit. */
  kill(): Promise<Exit>;
  /** SIGTERM, wait up to timeoutMs, then SIGKILL; resolves the exit. */
  stop(timeoutMs?: number): Promise<Exit>;
  /** The log so far. */
  log(): string;
}

/** Starts a command as a child with output appended to logFile. */
export function spawnLogged(command: string, args: string[], env: Record<string, string>, logFile: string): Child {
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
  if (child.pid === undefined) throw new Error(`could not start ${command} ${args.join(' ')}`);
  const pid = child.pid;
  let alive = true;
  const exited = new Promise<Exit>((resolve) => {
    child.once('exit', (code, signal) => {
      alive = false;
      resolve({ code, signal });
    });
  });
  const send = (signal: NodeJS.Signals) => {
    if (alive) child.kill(signal);
  };
  return {
    pid,
    logFile,
    exited,
    get alive() {
      return alive;
    },
    signal: send,
    async kill() {
      send('SIGKILL');
      return exited;
    },
    async stop(timeoutMs = 20_000) {
      send('SIGTERM');
      const timer = setTimeout(() => send('SIGKILL'), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
    log: () => readFileSync(logFile, 'utf8'),
  };
}

/** Starts `node --import tsx src/cli.ts run` with the given environment (on top of this process's). */
export function spawnBridge(env: Record<string, string>, logFile: string): Child {
  return spawnLogged(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'run'], env, logFile);
}

/**
 * Starts a bridge at LOG_LEVEL info with its ops server on a free port and its log named `name` in the account's run
 * directory; the child is added to `children` (the test file stops them).
 */
export async function spawnBridgeOn(
  env: Record<string, string>,
  name: string,
  children: Child[],
): Promise<{ child: Child; port: number }> {
  const port = await freePort();
  const child = spawnBridge(
    { ...env, LOG_LEVEL: 'info', HTTP_PORT: String(port) },
    `${runDir(env.BRIDGE_ACCOUNT!)}/${name}.log`,
  );
  children.push(child);
  return { child, port };
}

/** Runs a CLI command of the bridge to completion and returns its stdout (throws on a non-zero exit). */
export async function runCli(
  command: string | string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<string> {
  const result = await runCliFull(command, env, timeoutMs);
  if (result.code !== 0) {
    throw new Error(`reviews-bridge ${[command].flat().join(' ')} failed: exit ${result.code}\n${result.stderr}`);
  }
  return result.stdout;
}

/** Runs a CLI command of the bridge to completion: exit code, stdout and stderr (never throws on a failed exit). */
export function runCliFull(
  command: string | string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli.ts', ...[command].flat()],
      { cwd: ROOT, env: { ...process.env, ...env }, timeout: timeoutMs },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
        if (code === null)
          reject(new Error(`reviews-bridge ${[command].flat().join(' ')}: ${error?.message}\n${stderr}`));
        else resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Runs a project script (scripts/NAME ARGS) to completion; resolves its output, rejects with it on failure. */
export function script(
  name: string,
  args: string[],
  timeoutMs = 300_000,
  env: Record<string, string> = {},
): Promise<string> {
  const options = { cwd: ROOT, timeout: timeoutMs, env: { ...process.env, ...env } };
  return new Promise((resolve, reject) => {
    execFile('bash', [`scripts/${name}`, ...args], options, (error, stdout, stderr) => {
      if (error) reject(new Error(`scripts/${name} ${args.join(' ')} failed:\n${stdout}${stderr}`));
      else resolve(stdout + stderr);
    });
  });
}

/** A private single-node Kafka broker run by scripts/kafka.sh on its own port (data kept across stop/start). */
export class PrivateKafka {
  constructor(readonly port: number) {}

  get brokers(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Starts the broker (no-op when running) and waits until it serves requests. */
  start(): Promise<string> {
    return script('kafka.sh', ['start', String(this.port)]);
  }

  /** Graceful stop (SIGTERM), data kept. */
  stop(): Promise<string> {
    return script('kafka.sh', ['stop', String(this.port)]);
  }

  /** SIGKILL (a crash), data kept. */
  kill(): Promise<string> {
    return script('kafka.sh', ['kill', String(this.port)]);
  }

  /** Stops it and deletes its data. */
  clean(): Promise<string> {
    return script('kafka.sh', ['stop', String(this.port), '--clean']);
  }
}

/**
 * A private redis-server, by default with persistence like a production Redis (append-only file fsynced on every
 * write, so nothing acknowledged is lost even by SIGKILL), run as a direct child so it can be killed and restarted
 * by pid.
 */
export class PrivateRedis {
  private child: Child | null = null;
  private readonly dir: string;

  constructor(
    readonly port: number,
    name = `redis-${port}`,
    /** 'always': AOF fsynced on every write (the default, for fault tests); 'none': memory only (benchmarks). */
    private readonly persistence: 'always' | 'none' = 'always',
  ) {
    this.dir = runDir(name);
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | null {
    return this.child?.alive ? this.child.pid : null;
  }

  /** Deletes the data directory's contents (before the first start). */
  wipe(): void {
    rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true });
  }

  /** Starts the server on the same data directory and waits until it answers PING. */
  async start(): Promise<void> {
    if (this.child?.alive) return;
    this.child = spawnLogged(
      'redis-server',
      [
        '--bind',
        '127.0.0.1',
        '--port',
        String(this.port),
        '--dir',
        this.dir,
        '--appendonly',
        this.persistence === 'always' ? 'yes' : 'no',
        '--appendfsync',
        'always',
        '--save',
        '',
        '--daemonize',
        'no',
      ],
      {},
      `${this.dir}/redis.log`,
    );
    const child = this.child;
    await pollUntil(
      async () => {
        if (!child.alive) throw new Error(`redis-server on ${this.port} exited; see ${this.dir}/redis.log`);
        return (await this.pings()) ? true : undefined;
      },
      { timeoutMs: 20_000, what: `redis-server on ${this.port} to answer PING`, intervalMs: 50 },
    );
  }

  /** SIGKILL: a crash (the append-only file keeps every acknowledged write). */
  async kill(): Promise<void> {
    await this.child?.kill();
  }

  /** SIGTERM: Redis's own graceful shutdown. */
  async stop(): Promise<void> {
    await this.child?.stop();
  }

  private pings(): Promise<boolean> {
    return probeTcp(this.port, { send: 'PING\r\n', expect: '+PONG' });
  }
}

/**
 * Connects to 127.0.0.1:port: true once connected, or with `send`, once the first answer starts with `expect`.
 * False on any error or after a second.
 */
export async function probeTcp(port: number, exchange?: { send: string; expect: string }): Promise<boolean> {
  const { Socket } = await import('node:net');
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (data) => done(data.toString().startsWith(exchange?.expect ?? '')));
    socket.connect(port, '127.0.0.1', () => (exchange ? socket.write(exchange.send) : done(true)));
  });
}

/** A free TCP port on 127.0.0.1 (closed again before it is returned). */
export async function freePort(): Promise<number> {
  const { createServer } = await import('node:net');
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export { waitFor } from './wait.js';
