import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import type { Logger } from 'pino';
import { Gauge, Registry } from 'prom-client';
import { Agent, request, type Dispatcher } from 'undici';
import type { BridgeConfig, SchemaRegistryConfig } from '../config/config.js';
import { readSecret } from '../config/secrets.js';
import type { RecordType } from '../core/events.js';
import { registrySchema } from '../core/json-schemas.js';
import type { RecordContract, RecordContracts } from '../core/wire-format.js';

// The event contracts in a schema registry (SCHEMA_REGISTRY_URL, a Confluent-compatible API such as Apicurio
// Registry's /apis/ccompat/v7). At start the bridge registers, for every topic it writes, the JSON Schema of the
// records' values under the subject `<topic>-value`. A schema the subject already holds is looked up, not
// registered again (idempotent across replicas and restarts, and no write at all on an unchanged deployment). A new
// one is registered in one request: the registry checks it against the subject's compatibility rule (the
// bridge's SCHEMA_REGISTRY_COMPATIBILITY on a subject whose rule is missing or NONE) as it registers it, so two
// replicas starting together cannot both pass a check and then race; a version that would break the subject's
// consumers is refused there (409) with the registry's description of the change.

/** The record types written to a topic with a contract (the dead-letter topic and the changelog have none). */
export const CONTRACT_TOPICS = {
  'review.created': 'created',
  'review.status_changed': 'statusChanged',
  'review.updated': 'updated',
  'review.deleted': 'deleted',
  'review.heartbeat': 'heartbeat',
  'review.state': 'state',
} as const satisfies Record<RecordType, keyof BridgeConfig['kafka']['topics']>;

/** The registry refused a new version under a subject's compatibility rule. */
export class IncompatibleSchemaError extends Error {
  constructor(
    readonly subject: string,
    /** The change as the registry described it (one line). */
    readonly change: string,
  ) {
    super(
      `schema registry: the new schema of subject ${subject} is incompatible with its registered versions: ${change}`,
    );
    this.name = 'IncompatibleSchemaError';
  }
}

/** The registry could not be asked (down, refused the credentials, answered something unexpected). */
export class SchemaRegistryError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SchemaRegistryError';
  }
}

/** The subject of a topic's record values (Confluent's TopicNameStrategy). */
export function subjectOf(topic: string): string {
  return `${topic}-value`;
}

const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';

/** A small client of the Confluent-compatible API: what registration needs, nothing more. */
export class SchemaRegistryClient {
  private readonly dispatcher: Dispatcher;

  constructor(private readonly config: SchemaRegistryConfig) {
    const ca = config.caFile ? [...rootCertificates, readFileSync(config.caFile, 'utf8')] : undefined;
    this.dispatcher = new Agent({ connect: { timeout: 5_000, ...(ca ? { ca } : {}) } });
  }

  /** The id of `schema` under `subject` when the subject already holds it; null when not. */
  async lookup(subject: string, schema: string): Promise<number | null> {
    const { status, body } = await this.call('POST', `/subjects/${encodeURIComponent(subject)}`, jsonSchema(schema));
    if (status === 404) return null;
    return this.idOf(status, body, `look up ${subject}`);
  }

  /** The subject's compatibility rule; null when the registry says it has none (Apicurio answers the global one). */
  async subjectRule(subject: string): Promise<string | null> {
    const path = `/config/${encodeURIComponent(subject)}?defaultToGlobal=false`;
    const { status, body } = await this.call('GET', path);
    if (status === 404) return null;
    if (status !== 200) throw this.unexpected(status, body, `read the rule of ${subject}`);
    const answer = body as { compatibilityLevel?: string; compatibility?: string };
    return answer.compatibilityLevel ?? answer.compatibility ?? null;
  }

  /** Puts `rule` on the subject (a rule another client put there at the same moment is left as it is). */
  async setSubjectRule(subject: string, rule: string): Promise<void> {
    const { status, body } = await this.call('PUT', `/config/${encodeURIComponent(subject)}`, {
      compatibility: rule,
    });
    // 409 from Apicurio: another replica put the rule in the meantime (creating it twice conflicts); it stands.
    if (status !== 200 && status !== 409) throw this.unexpected(status, body, `set the rule of ${subject}`);
  }

  /** Registers `schema` under `subject` (checked against the subject's rule by the registry); its id. */
  async register(subject: string, schema: string): Promise<number> {
    const path = `/subjects/${encodeURIComponent(subject)}/versions`;
    const { status, body } = await this.call('POST', path, jsonSchema(schema));
    if (status === 409) throw new IncompatibleSchemaError(subject, changeOf(body));
    return this.idOf(status, body, `register under ${subject}`);
  }

  /** The URL that serves the schema of `id` (what `dataschema` names). */
  schemaUrl(id: number): string {
    return `${this.config.url}/schemas/ids/${id}`;
  }

  /** Closes the connections. */
  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  private idOf(status: number, body: unknown, what: string): number {
    const id = (body as { id?: unknown } | null)?.id;
    if (status !== 200 || typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id > 0xffffffff)
      throw this.unexpected(status, body, what);
    return id;
  }

  private unexpected(status: number, body: unknown, what: string): SchemaRegistryError {
    // The registry's own message (never the schema, never a credential), cut to one short line.
    const message = (body as { message?: unknown } | null)?.message;
    const detail = typeof message === 'string' ? `: ${oneLine(message).slice(0, 200)}` : '';
    return new SchemaRegistryError(`schema registry: cannot ${what} (HTTP ${status}${detail})`);
  }

  private async call(method: 'GET' | 'POST' | 'PUT', path: string, payload?: unknown) {
    const headers: Record<string, string> = { accept: CONTENT_TYPE };
    if (payload !== undefined) headers['content-type'] = CONTENT_TYPE;
    if (this.config.username !== null && this.config.password) {
      const password = await readSecret(this.config.password, 'SCHEMA_REGISTRY_PASSWORD');
      headers.authorization = `Basic ${Buffer.from(`${this.config.username}:${password}`).toString('base64')}`;
    }
    try {
      const answer = await request(`${this.config.url}${path}`, {
        method,
        headers,
        body: payload === undefined ? undefined : JSON.stringify(payload),
        dispatcher: this.dispatcher,
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      });
      const text = await answer.body.text();
      let body: unknown = null;
      try {
        body = text === '' ? null : JSON.parse(text);
      } catch {
        body = null;
      }
      if (answer.statusCode === 401 || answer.statusCode === 403)
        throw new SchemaRegistryError(
          `schema registry: HTTP ${answer.statusCode} (check SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD_FILE)`,
        );
      return { status: answer.statusCode, body };
    } catch (err) {
      if (err instanceof SchemaRegistryError) throw err;
      const code = (err as { code?: unknown }).code;
      throw new SchemaRegistryError(
        `schema registry: ${method} ${path} failed (${typeof code === 'string' ? code : (err as Error).message})`,
        { cause: err },
      );
    }
  }
}

function jsonSchema(schema: string) {
  return { schemaType: 'JSON', schema };
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * The change a 409 names: Apicurio lists "diff types", Confluent "details"; else the registry's message as it
 * is, on one line.
 */
function changeOf(body: unknown): string {
  const message = oneLine(String((body as { message?: unknown } | null)?.message ?? 'incompatible (no detail given)'));
  const listed = /list of diff types: \[(.*)\]/.exec(message) ?? /details: \[(.*)\]/.exec(message);
  return (listed?.[1] ?? message).slice(0, 500);
}

/**
 * Registers the schema of every topic of `topics` that has a contract, in `wire` format, and returns what each
 * record type's messages must name. A subject whose rule is missing or NONE gets `rule` first.
 */
export async function registerContracts(
  client: SchemaRegistryClient,
  topics: BridgeConfig['kafka']['topics'],
  registry: Pick<SchemaRegistryConfig, 'compatibility' | 'wireFormat'>,
  logger?: Logger,
): Promise<RecordContracts> {
  const byType = {} as Record<RecordType, RecordContract>;
  for (const [type, key] of Object.entries(CONTRACT_TOPICS) as [RecordType, keyof typeof topics][]) {
    const subject = subjectOf(topics[key]);
    const schema = registrySchema(type, registry.wireFormat);
    let id = await client.lookup(subject, schema);
    if (id === null) {
      // A subject's rule of its own wins; NONE counts as none, since some registries (Apicurio) answer the global
      // default, NONE, for a subject that has no rule of its own.
      const rule = await client.subjectRule(subject);
      if (rule === null || (rule === 'NONE' && registry.compatibility !== 'NONE')) {
        await client.setSubjectRule(subject, registry.compatibility);
      }
      id = await client.register(subject, schema);
      logger?.info({ subject, schemaId: id }, 'schema registered');
    }
    byType[type] = { id, url: client.schemaUrl(id) };
  }
  return { wire: registry.wireFormat, byType };
}

/** Where the process stands with the registry (what /readyz and the metric say). */
export type ContractsState = 'registering' | 'registered' | 'unreachable' | 'incompatible';

const STATES: readonly ContractsState[] = ['registering', 'registered', 'unreachable', 'incompatible'];

/**
 * The contracts of every account of a process: registers them at start (retrying while the registry cannot be
 * reached), then hands each account the schemas of its topics. An incompatible schema stops there: the accounts
 * are not started, one error line names the subject and the change, /readyz and
 * reviews_bridge_schema_registry_state{state="incompatible"} say so until the process is replaced.
 */
export class SchemaContracts {
  /** The process-wide gauge of the registration state. */
  readonly registry = new Registry();
  private current: ContractsState = 'registering';
  private problem: string | null = null;
  private readonly byAccount = new Map<string, RecordContracts>();
  private readonly client: SchemaRegistryClient;
  private stopped = false;
  private wake: (() => void) | null = null;

  constructor(
    private readonly accounts: readonly BridgeConfig[],
    private readonly config: SchemaRegistryConfig,
    private readonly logger: Logger,
    private readonly retryMs = { initial: 1_000, max: 30_000 },
  ) {
    this.client = new SchemaRegistryClient(config);
    new Gauge({
      name: 'reviews_bridge_schema_registry_state',
      help: 'Registration of the event contracts in the schema registry: 1 for the state the process is in (registering, registered, unreachable, incompatible).',
      labelNames: ['state'],
      registers: [this.registry],
      collect: () => {
        const gauge = this.registry.getSingleMetric('reviews_bridge_schema_registry_state') as Gauge<'state'>;
        for (const state of STATES) gauge.set({ state }, state === this.current ? 1 : 0);
      },
    });
  }

  /** The registration state. */
  get state(): ContractsState {
    return this.current;
  }

  /** What /readyz says: true once registered, else the state and, when there is one, the reason. */
  readiness(): true | string {
    if (this.current === 'registered') return true;
    return this.problem === null ? this.current : `${this.current}: ${this.problem}`;
  }

  /** The schemas of an account's topics (after register() resolved true). */
  of(account: string): RecordContracts | null {
    return this.byAccount.get(account) ?? null;
  }

  /**
   * Registers every account's contracts; resolves true once done, false on an incompatible schema or when
   * stopped first. An unreachable registry is retried with backoff (a warning per failure, not per retry).
   */
  async register(): Promise<boolean> {
    let delay = this.retryMs.initial;
    let warned: string | null = null;
    while (!this.stopped) {
      try {
        for (const account of this.accounts) {
          if (this.byAccount.has(account.account)) continue;
          const contracts = await registerContracts(this.client, account.kafka.topics, this.config, this.logger);
          this.byAccount.set(account.account, contracts);
        }
        this.current = 'registered';
        this.problem = null;
        this.logger.info(
          { subjects: this.accounts.length * Object.keys(CONTRACT_TOPICS).length, wireFormat: this.config.wireFormat },
          'event contracts registered in the schema registry',
        );
        return true;
      } catch (err) {
        if (err instanceof IncompatibleSchemaError) {
          this.current = 'incompatible';
          this.problem = `${err.subject}: ${err.change}`;
          this.logger.error({ subject: err.subject, change: err.change }, `refusing to start: ${err.message}`);
          return false;
        }
        this.current = 'unreachable';
        this.problem = err instanceof Error ? err.message : String(err);
        if (warned !== this.problem) this.logger.warn({ retryMs: delay }, `${this.problem}; retrying`);
        warned = this.problem;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delay);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        delay = Math.min(delay * 2, this.retryMs.max);
      }
    }
    return false;
  }

  /** Stops retrying and closes the connections. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.client.close();
  }
}
