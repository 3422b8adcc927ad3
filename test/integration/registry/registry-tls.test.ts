import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SchemaRegistryConfig } from '../../../src/config/config.js';
import { SchemaRegistryClient, registerContracts } from '../../../src/kafka/schema-registry.js';
import { makeCerts, type TestCerts } from '../../helpers/secure-servers.js';
import { testRegistryUrl } from '../../helpers/registry.js';
import { uniqueName } from '../../helpers/services.js';

// The registry connection like the bridge's others: HTTPS trusting SCHEMA_REGISTRY_CA_FILE, basic auth with the
// password read from SCHEMA_REGISTRY_PASSWORD_FILE. A TLS front with a throw-away CA asks for the credentials and
// passes the requests on to the run's real registry.

const PASSWORD = 'registry-password-5e1d';
let certs: TestCerts;
let front: Server;
let frontUrl: string;
let passwordFile: string;
let wrongFile: string;

beforeAll(async () => {
  const registry = await testRegistryUrl();
  certs = makeCerts();
  passwordFile = join(certs.dir, 'registry-password');
  writeFileSync(passwordFile, `${PASSWORD}\n`);
  wrongFile = join(certs.dir, 'wrong-password');
  writeFileSync(wrongFile, 'not-the-password\n');
  const expected = `Basic ${Buffer.from(`bridge:${PASSWORD}`).toString('base64')}`;
  front = createServer({ cert: readFileSync(certs.serverCert), key: readFileSync(certs.serverKey) }, (req, res) => {
    if (req.headers.authorization !== expected) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"message":"Unauthorized","error_code":401}');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').replace(/^\/apis\/ccompat\/v7/, '');
      void fetch(`${registry}${path}`, {
        method: req.method,
        headers: { 'content-type': req.headers['content-type'] ?? 'application/json' },
        body: req.method === 'GET' ? undefined : Buffer.concat(chunks),
      }).then(async (answer) => {
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
      });
    });
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const address = front.address();
  frontUrl = `https://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/apis/ccompat/v7`;
}, 600_000);

afterAll(async () => {
  await new Promise((resolve) => front?.close(resolve));
  certs?.remove();
});

function settings(overrides: Partial<SchemaRegistryConfig>): SchemaRegistryConfig {
  return {
    url: frontUrl,
    username: 'bridge',
    password: { file: passwordFile },
    caFile: certs.ca,
    compatibility: 'BACKWARD',
    wireFormat: 'structured',
    ...overrides,
  };
}

function topics() {
  const id = uniqueName('registry-tls');
  return {
    created: `${id}.created`,
    statusChanged: `${id}.status_changed`,
    updated: `${id}.updated`,
    deadLetter: `${id}.dead_letter`,
    state: `${id}.state`,
    deleted: `${id}.deleted`,
    heartbeat: `${id}.heartbeat`,
    changelog: `${id}.changelog`,
  };
}

describe('schema registry over TLS with basic auth', () => {
  it('registers through HTTPS trusting the CA file, with the password from its file', async () => {
    const client = new SchemaRegistryClient(settings({}));
    try {
      const contracts = await registerContracts(client, topics(), {
        compatibility: 'BACKWARD',
        wireFormat: 'structured',
      });
      expect(contracts.byType['review.created'].url).toMatch(new RegExp(`^${frontUrl}/schemas/ids/\\d+$`));
    } finally {
      await client.close();
    }
  });

  it('refuses a certificate its CA file does not vouch for, and says which request failed', async () => {
    const client = new SchemaRegistryClient(settings({ caFile: null }));
    try {
      const error = (await client.lookup('x-value', '{}').catch((err: unknown) => err)) as Error;
      expect(error.name).toBe('SchemaRegistryError');
      expect(error.message).toMatch(
        /failed \((SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|[A-Z_]*CERT[A-Z_]*)\)/,
      );
    } finally {
      await client.close();
    }
  });

  it('a wrong password names the settings to check, never the password', async () => {
    const client = new SchemaRegistryClient(settings({ password: { file: wrongFile } }));
    try {
      const error = (await client.lookup('x-value', '{}').catch((err: unknown) => err)) as Error;
      expect(error.message).toContain('HTTP 401');
      expect(error.message).toContain('SCHEMA_REGISTRY_PASSWORD_FILE');
      expect(error.message).not.toContain('not-the-password');
      expect(error.message).not.toContain(PASSWORD);
    } finally {
      await client.close();
    }
  });
});
