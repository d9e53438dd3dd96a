/** Metadata key of `@Idempotent()` options (class and method). */
export const IDEMPOTENT_OPTIONS = 'nestjs-outbox:idempotent';
