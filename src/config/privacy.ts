import type { Logger } from 'pino';
import type { BridgeConfig, PrivacyConfig } from './config.js';
import { createFieldPolicy, DEFAULT_FIELD_POLICY_SPEC, type FieldPolicy } from '../core/field-policy.js';
import { readSecretSync } from './secrets.js';

// Builds the process's field policy from the configuration: reads the hash key and says, once at start, when an
// operator chose to publish personal data raw.

/** The defaults: e-mail addresses dropped (no key), dead letters masked. */
export const DEFAULT_PRIVACY: PrivacyConfig = {
  fields: DEFAULT_FIELD_POLICY_SPEC,
  hashKey: null,
  deadLetterPayload: 'masked',
};

/** The field policy of the configuration; logs a warning for every raw opt-in. */
export function fieldPolicyFromConfig(privacy: PrivacyConfig, logger: Logger): FieldPolicy {
  const key = privacy.hashKey ? Buffer.from(readSecretSync(privacy.hashKey, 'event hash key'), 'utf8') : null;
  if (privacy.fields.allowRawEmail) {
    logger.warn(
      { setting: 'EVENT_FIELDS_ALLOW_RAW_EMAIL' },
      'e-mail addresses are published as received: every consumer of the topics receives them',
    );
  }
  if (privacy.deadLetterPayload === 'raw') {
    logger.warn(
      { setting: 'DEAD_LETTER_PAYLOAD' },
      'dead letters carry the records as received, personal data included',
    );
  }
  return createFieldPolicy(privacy.fields, key);
}

/** Says at every start that the fingerprint key is generated (kept in Redis) rather than read from a file. */
export function warnGeneratedFingerprintKey(
  config: Pick<BridgeConfig, 'fingerprintKeyFile' | 'fingerprintKekFile'>,
  logger: Logger,
): void {
  if (config.fingerprintKeyFile) return;
  if (config.fingerprintKekFile) {
    logger.warn(
      { setting: 'FINGERPRINT_KEK_FILE' },
      'the fingerprint key is generated and kept in Redis, its changelog copy wrapped: whoever reads the bridge’s Redis keys can read it; set FINGERPRINT_KEY_FILE in production',
    );
  } else {
    logger.warn(
      { setting: 'FINGERPRINT_KEY_GENERATE' },
      'the fingerprint key is generated and kept in Redis only: a Redis loss costs the edits made until the next sweep; set FINGERPRINT_KEY_FILE in production',
    );
  }
}
