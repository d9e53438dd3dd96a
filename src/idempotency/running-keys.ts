import type { IdempotencyAttempt, IdempotencyBegin } from './held-attempt';

/**
 * The keys this process holds right now (taken, not yet committed or rolled back), with the fingerprint of the
 * request holding each. A duplicate of one of them is answered in flight (409, or 422 for a different request) at
 * once, as the database's lock would answer it, but without waiting for a connection: when every pooled connection
 * is held by long handlers, a client's retry of a key still in use learns that it is in use instead of getting
 * "database busy". Keys held by other processes are still decided by the database.
 */
export class RunningKeys {
  private readonly held = new Map<string, { fingerprint: string }>();

  /** Answers a key held here in flight; else runs `take` and remembers an acquired key until its attempt ends. */
  async take(
    scope: string,
    key: string,
    fingerprint: string,
    take: () => Promise<IdempotencyBegin>,
  ): Promise<IdempotencyBegin> {
    const id = `${scope}\u0000${key}`;
    const holder = this.held.get(id);
    if (holder !== undefined) return { kind: 'in-flight', sameRequest: holder.fingerprint === fingerprint };
    const begun = await take();
    if (begun.kind !== 'acquired') return begun;
    const mine = { fingerprint };
    this.held.set(id, mine);
    // Forgets only its own entry: the next holder may have taken the key as soon as this commit released it.
    const forget = () => {
      if (this.held.get(id) === mine) this.held.delete(id);
    };
    return { kind: 'acquired', attempt: this.tracked(begun.attempt, forget) };
  }

  /** `attempt`, forgetting the key once it commits or rolls back (whatever the outcome). */
  private tracked(attempt: IdempotencyAttempt, forget: () => void): IdempotencyAttempt {
    const ending =
      <A extends unknown[], R>(end: (...args: A) => Promise<R>) =>
      async (...args: A): Promise<R> => {
        try {
          return await end(...args);
        } finally {
          forget();
        }
      };
    return {
      context: attempt.context,
      run: (work) => attempt.run(work),
      commit: ending((record) => attempt.commit(record)),
      commitWithoutRecord: ending(() => attempt.commitWithoutRecord()),
      rollback: ending(() => attempt.rollback()),
    };
  }
}
