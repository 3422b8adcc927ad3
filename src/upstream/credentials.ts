import { readSecret, SecretError, type SecretSource } from '../config/secrets.js';

// Credentials are rotated in the operator's portal and shown once; a running bridge must pick up the new secret
// without a restart. So the token manager asks a provider every time it fetches a token, and the provider reads
// its sources afresh on every call (src/config/secrets.ts re-reads files; mounted Kubernetes secrets are updated in place).

/** The client-credentials pair the token endpoint authenticates. */
export interface ClientCredentials {
  clientId: string;
  clientSecret: string;
}

/** Supplies the current credentials; called once per token fetch, never cached by the client. */
export type CredentialsProvider = () => Promise<ClientCredentials>;

/** Why credentials could not be read (the secrets module's error; the message never carries a value). */
export { SecretError as CredentialsError };
export type { SecretSource };

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
      readSecret(sources.clientId, 'client id', env),
      readSecret(sources.clientSecret, 'client secret', env),
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
