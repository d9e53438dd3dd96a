/** What an `@OnOutboxEvent()` handler learns about the message besides its payload (the method's 2nd argument). */
export interface OutboxEventContext {
  /** The message's id: stable across retries (the handler's deduplication record is keyed by it). */
  readonly messageId: string;
  /** The pattern given to `emit()`. */
  readonly pattern: string;
  /** The ordering key given to `emit()`, or null. */
  readonly key: string | null;
  /** The headers given to `emit()`. */
  readonly headers: Readonly<Record<string, string>>;
  /** Delivery attempts of the message so far, this one included (1 on the first run). */
  readonly attempts: number;
  /** The handler's name (`ClassName.methodName` unless `@OnOutboxEvent(pattern, { name })` gave one). */
  readonly handler: string;
  /**
   * True when `OutboxDeadLetters.dryRun()` runs the handler: its transaction is always rolled back, so only writes
   * through the outbox's transaction are undone — skip effects outside it (HTTP calls, other databases, files).
   */
  readonly dryRun?: boolean;
}
