import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { SecretError } from '../core/errors.js';

// Every secret the bridge uses (upstream client credentials, Redis password, Kafka SASL password, event hash key)
// is read here. Files are re-read on every use, so a rotated, file-mounted secret (a Kubernetes Secret is updated
// in place) is picked up by the next token fetch or connection without a restart. Errors name the source (a
// variable or a path), never a value.

/**
 * Where one secret comes from: a literal value, a file (re-read on every call), or an environment variable name
 * `X` whose value is taken from `X_FILE` (a path, re-read) when that is set, else from `X` itself.
 */
export type SecretSource = { value: string } | { file: string } | { env: string };

/** Re-exported from the one error model, where it is defined. */
export { SecretError };

// Secret files written by editors or `echo` end with a newline that is not part of the secret.
function checked(text: string, label: string, where: string): string {
  const value = text.trim();
  if (value === '') throw new SecretError(`${label} ${where} is empty`);
  return value;
}

function fileError(err: unknown, label: string, path: string): SecretError {
  const code = (err as NodeJS.ErrnoException).code ?? 'error';
  return new SecretError(`cannot read ${label} from file ${path} (${code})`);
}

function fromEnv(source: { env: string }, label: string, env: NodeJS.ProcessEnv): { file: string } | string {
  const file = env[`${source.env}_FILE`]?.trim();
  if (file) return { file };
  const value = env[source.env]?.trim();
  if (!value) throw new SecretError(`${label}: neither ${source.env} nor ${source.env}_FILE is set`);
  return value;
}

/** Reads a secret now (files and `X_FILE` variables afresh on every call). */
export async function readSecret(
  source: SecretSource,
  label: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  if ('value' in source) return checked(source.value, label, 'value');
  const resolved = 'file' in source ? source : fromEnv(source, label, env);
  if (typeof resolved === 'string') return resolved;
  let text: string;
  try {
    text = await readFile(resolved.file, 'utf8');
  } catch (err) {
    throw fileError(err, label, resolved.file);
  }
  return checked(text, label, `file ${resolved.file}`);
}

/** The synchronous form of {@link readSecret}, for start-up checks and code paths that cannot await. */
export function readSecretSync(source: SecretSource, label: string, env: NodeJS.ProcessEnv = process.env): string {
  if ('value' in source) return checked(source.value, label, 'value');
  const resolved = 'file' in source ? source : fromEnv(source, label, env);
  if (typeof resolved === 'string') return resolved;
  let text: string;
  try {
    text = readFileSync(resolved.file, 'utf8');
  } catch (err) {
    throw fileError(err, label, resolved.file);
  }
  return checked(text, label, `file ${resolved.file}`);
}

/** PEM files of a TLS connection (null or absent when not set). */
export interface TlsFilePaths {
  caFile?: string | null;
  certFile?: string | null;
  keyFile?: string | null;
}

/** node:tls options from PEM files (read when a client is built: a renewed certificate needs a restart). */
export function readTlsFiles(files: TlsFilePaths | undefined): { ca?: Buffer; cert?: Buffer; key?: Buffer } {
  const options: { ca?: Buffer; cert?: Buffer; key?: Buffer } = {};
  if (files?.caFile) options.ca = readFileSync(files.caFile);
  if (files?.certFile) options.cert = readFileSync(files.certFile);
  if (files?.keyFile) options.key = readFileSync(files.keyFile);
  return options;
}
