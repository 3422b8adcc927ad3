import { editDistance } from '../core/edit-distance.js';
import { ENV_VARS } from './config.js';

// Settings whose name is mistyped are otherwise ignored without a word (POLL_INTERVAL), or reported only as the
// setting they were meant for being missing (KAFKA_BROKER: "KAFKA_BROKERS: required"). A variable under one of the
// bridge's prefixes (the first word of its settings' names: KAFKA_, REDIS_, UPSTREAM_, POLL_, SWEEP_, ...) that is
// not a setting is said at start, as a warning, with the setting it most likely meant. Left alone: prefixes other
// software owns (OTEL_: the OpenTelemetry SDK reads more of them than the bridge declares; NO_: NO_COLOR), and the
// variables Kubernetes derives from a Service's name (a Service named redis or kafka gives REDIS_SERVICE_HOST,
// KAFKA_PORT_9092_TCP...).

/** A variable under the bridge's prefixes that is not one of its settings, and the setting it most likely meant. */
export interface UnknownSetting {
  name: string;
  /** The nearest setting's name, or null when none is near. */
  meant: string | null;
}

/** Prefixes of the bridge's settings that other software uses too: their unknown names are not the bridge's. */
const SHARED_PREFIXES: ReadonlySet<string> = new Set(['OTEL', 'NO']);

/** Kubernetes's service links: <SERVICE>_SERVICE_HOST, <SERVICE>_SERVICE_PORT[_NAME], <SERVICE>_PORT[_N_PROTO[_X]]. */
const SERVICE_LINK = /_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$/;

/** The prefixes a variable of the bridge starts with: the first word of each setting's name. */
export function settingPrefixes(known: readonly string[] = ENV_VARS): Set<string> {
  return new Set(known.map((name) => name.split('_')[0]!).filter((prefix) => !SHARED_PREFIXES.has(prefix)));
}

/** The setting `name` most likely meant: one it begins or ends (POLL_INTERVAL), or at most two edits away. */
function meant(name: string, known: readonly string[]): string | null {
  let best: { candidate: string; distance: number } | null = null;
  for (const candidate of known) {
    const distance = editDistance(name, candidate);
    const near = distance <= 2 || candidate.startsWith(`${name}_`) || name.startsWith(`${candidate}_`);
    if (near && (best === null || distance < best.distance)) best = { candidate, distance };
  }
  return best?.candidate ?? null;
}

/** The variables of `env` under the bridge's prefixes that are not settings, each with the setting it may mean. */
export function unknownSettings(
  env: Record<string, string | undefined>,
  known: readonly string[] = ENV_VARS,
): UnknownSetting[] {
  const names = new Set(known);
  const prefixes = settingPrefixes(known);
  return Object.keys(env)
    .filter((name) => env[name] !== undefined && /^[A-Z][A-Z0-9_]*$/.test(name) && !names.has(name))
    .filter((name) => prefixes.has(name.split('_')[0]!) && name.includes('_') && !SERVICE_LINK.test(name))
    .sort()
    .map((name) => ({ name, meant: meant(name, known) }));
}

/** The warning for an unknown setting (names only, never a value). */
export function unknownSettingMessage({ name, meant }: UnknownSetting): string {
  return `${name} is not a setting of the bridge and is ignored${meant === null ? '' : ` (did you mean ${meant}?)`}`;
}
