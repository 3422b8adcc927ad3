import { createRequire } from 'node:module';
import type { AuthenticationProviderArgs, KafkaConfig, Mechanism } from 'kafkajs';
import type { BridgeConfig } from '../config/config.js';
import { readSecret, readTlsFiles } from '../config/secrets.js';

// TLS and SASL options of the Kafka client. kafkajs takes a static password for PLAIN and SCRAM and caches the
// authenticator on the options object, so a rotated password file would only be seen after a restart. Instead the
// bridge hands kafkajs a custom authentication provider (its documented extension point, `sasl.authenticationProvider`)
// that reads the password file on every authentication, i.e. on every new broker connection, and then delegates
// to kafkajs' own PLAIN/SCRAM implementation.

type Provider = (sasl: { username: string; password: string }) => (args: AuthenticationProviderArgs) => {
  authenticate(): Promise<void>;
};

const require = createRequire(import.meta.url);
// kafkajs 2.x ships its authenticators as CommonJS modules without an exports map, so they can be required.
const BUILT_IN: Record<string, () => Provider> = {
  plain: () => require('kafkajs/src/broker/saslAuthenticator/plain.js') as Provider,
  'scram-sha-256': () => require('kafkajs/src/broker/saslAuthenticator/scram256.js') as Provider,
  'scram-sha-512': () => require('kafkajs/src/broker/saslAuthenticator/scram512.js') as Provider,
};

/** A kafkajs SASL mechanism whose password is read afresh for every connection's authentication. */
export function rereadingSasl(sasl: NonNullable<BridgeConfig['kafka']['sasl']>): Mechanism {
  const builtIn = BUILT_IN[sasl.mechanism]!();
  return {
    mechanism: sasl.mechanism,
    authenticationProvider: (args: AuthenticationProviderArgs) => ({
      async authenticate() {
        const password = await readSecret(sasl.password, 'Kafka SASL password');
        await builtIn({ username: sasl.username, password })(args).authenticate();
      },
    }),
  };
}

/** The `ssl` and `sasl` options of the Kafka client for the configuration. */
export function kafkaSecurity(config: BridgeConfig['kafka']): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  const tls = readTlsFiles(config.tls);
  return {
    ssl: config.ssl ? (Object.keys(tls).length > 0 ? tls : true) : false,
    ...(config.sasl ? { sasl: rereadingSasl(config.sasl) } : {}),
  };
}
