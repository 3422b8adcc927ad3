import { readFile } from 'node:fs/promises';

// Credentials are rotated in the operator's portal and shown once; a running bridge must pick up the new secret
// without a restart. So the token manager asks a provider every time it fetches a token, and the file-backed
// provider re-reads its files on every call (mounted Kubernetes secrets are updated in place).

/** The client-credentials pair the token endpoint authenticates. */
export interface ClientCredentials {
  clientId: string;
  clientSecret: string;
}

/** Supplies the current credentials; called once per token fetch, never cached by the client. */
export type CredentialsProvider = () => Promise<ClientCredentials>;

/**
 * Where one credential comes from: a literal value, a file (re-read on every call), or an environment variable
 * name `X` whose value is taken from `X_FILE` (a path, re-read) when that is set, else from `X` itself.
 */
export type SecretSource = { value: string } | { file: string } | { env: string };

/** Why credentials could not be read; the message names the source (a path or variable), never a value. */
export class CredentialsError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CredentialsError';
  }
}

async function readSecretFile(path: string, label: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new CredentialsError(`cannot read ${label} from file ${path} (${code})`);
  }
  // Secret files written by editors or `echo` end with a newline that is not part of the secret.
  const value = text.trim();
  if (value === '') throw new CredentialsError(`${label} file ${path} is empty`);
  return value;
}

async function resolve(source: SecretSource, label: string, env: NodeJS.ProcessEnv): Promise<string> {
  if ('value' in source) {
    if (source.value.trim() === '') throw new CredentialsError(`${label} is empty`);
    return source.value.trim();
  }
  if ('file' in source) return readSecretFile(source.file, label);
  const file = env[`${source.env}_FILE`]?.trim();
  if (file) return readSecretFile(file, label);
  const value = env[source.env]?.trim();
  if (!value) throw new CredentialsError(`${label}: neither ${source.env} nor ${source.env}_FILE is set`);
  return value;
}

/**
 * A credentials provider that resolves both sources afresh on every call, so a rotated secret file (or a changed
 * environment, in tests) is picked up by the next token fetch.
 */
export function fileOrEnvCredentials(
  sources: { clientId: SecretSource; clientSecret: SecretSource },
  env: NodeJS.ProcessEnv = process.env,
): CredentialsProvider {
  return async () => {
    const [clientId, clientSecret] = await Promise.all([
      resolve(sources.clientId, 'client id', env),
      resolve(sources.clientSecret, 'client secret', env),
    ]);
    return { clientId, clientSecret };
  };
}

/** Convenience: credentials from `${prefix}CLIENT_ID[_FILE]` and `${prefix}CLIENT_SECRET[_FILE]`, re-read per call. */
export function envCredentials(prefix = 'UPSTREAM_', env: NodeJS.ProcessEnv = process.env): CredentialsProvider {
  return fileOrEnvCredentials(
    { clientId: { env: `${prefix}CLIENT_ID` }, clientSecret: { env: `${prefix}CLIENT_SECRET` } },
    env,
  );
}
