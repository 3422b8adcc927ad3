import { request, type Dispatcher } from 'undici';
import type { Faults, PoisonKind, PoisonRecord, SimulatorOptions, SimulatorStats } from './types.js';

// A typed client of the HTTP control routes, for tests and demos that run the simulator as a separate process.
// Same methods as SimulatorControl, made async.

/** Thrown when a control call is refused; status is the HTTP status, message the simulator's error text. */
export class SimulatorControlError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'SimulatorControlError';
  }
}

/** Drives a simulator over HTTP (base URL as printed by `reviews-bridge simulate`). */
export class SimulatorHttpControl {
  private readonly base: string;

  constructor(
    baseUrl: string,
    private readonly dispatcher?: Dispatcher,
  ) {
    this.base = baseUrl.replace(/\/+$/, '');
  }

  /** Creates a review (id = max+1, updated_date = now). */
  createReview(fields: Partial<Record<string, unknown>> = {}): Promise<Record<string, unknown>> {
    return this.call('POST', '/_control/reviews', fields) as Promise<Record<string, unknown>>;
  }

  /** Changes publication statuses; updated_date moves forward. */
  setStatus(id: number, status: { client?: string; pwr?: string }): Promise<Record<string, unknown>> {
    return this.call('POST', `/_control/reviews/${id}/status`, status) as Promise<Record<string, unknown>>;
  }

  /** Changes publication statuses with an updated_date `lateByMs` in the past (a late-visible change). */
  setStatusLate(
    id: number,
    status: { client?: string; pwr?: string },
    lateByMs: number,
  ): Promise<Record<string, unknown>> {
    return this.call('POST', `/_control/reviews/${id}/late-status`, { ...status, lateByMs }) as Promise<
      Record<string, unknown>
    >;
  }

  /** Edits other fields; updated_date stays. */
  edit(id: number, fields: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.call('PATCH', `/_control/reviews/${id}`, fields) as Promise<Record<string, unknown>>;
  }

  /** Removes a review upstream (it disappears from the listing). */
  async removeReview(id: number): Promise<void> {
    await this.call('DELETE', `/_control/reviews/${id}`);
  }

  /** Lists a removed review again (a comeback). */
  async restoreReview(id: number): Promise<void> {
    await this.call('POST', `/_control/reviews/${id}/restore`);
  }

  /** The review, or null when there is none with that id. */
  async get(id: number): Promise<Record<string, unknown> | null> {
    try {
      return (await this.call('GET', `/_control/reviews/${id}`)) as Record<string, unknown>;
    } catch (error) {
      if (error instanceof SimulatorControlError && error.status === 404) return null;
      throw error;
    }
  }

  /** Replaces the given fault settings. */
  async setFaults(faults: Partial<Faults>): Promise<void> {
    await this.call('PUT', '/_control/faults', faults);
  }

  /** Replaces the throttle: null disables, undefined restores the default. */
  async setRateLimit(rateLimit: SimulatorOptions['rateLimit']): Promise<void> {
    await this.call('PUT', '/_control/rate-limit', rateLimit);
  }

  /** Invalidates every issued token. */
  async revokeTokens(): Promise<void> {
    await this.call('POST', '/_control/tokens/revoke');
  }

  /** Request counters. */
  stats(): Promise<SimulatorStats> {
    return this.call('GET', '/_control/stats') as Promise<SimulatorStats>;
  }

  /** Zeroes the counters. */
  async resetStats(): Promise<void> {
    await this.call('POST', '/_control/stats/reset');
  }

  /** Creates one poisoned review per kind (all by default); see SimulatorControl.addPoisonReviews. */
  addPoisonReviews(kinds?: PoisonKind[]): Promise<PoisonRecord[]> {
    return this.call('POST', '/_control/poison-reviews', kinds === undefined ? {} : { kinds }) as Promise<
      PoisonRecord[]
    >;
  }

  /** Number of reviews (= highest id). */
  async reviewCount(): Promise<number> {
    const { count } = (await this.call('GET', '/_control/review-count')) as { count: number };
    return count;
  }

  private async call(method: Dispatcher.HttpMethod, path: string, body?: unknown): Promise<unknown> {
    const response = await request(`${this.base}${path}`, {
      method,
      dispatcher: this.dispatcher,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.body.text();
    const parsed: unknown = text === '' ? undefined : JSON.parse(text);
    if (response.statusCode >= 400) {
      const message = (parsed as { error?: unknown } | undefined)?.error;
      throw new SimulatorControlError(
        response.statusCode,
        typeof message === 'string' ? message : `HTTP ${response.statusCode}`,
      );
    }
    return parsed;
  }
}
