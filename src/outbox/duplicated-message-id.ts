/**
 * The id a database's unique-violation message names, if any: PostgreSQL's detail `Key (message_id,
 * destination)=(<id>, <destination>)`, MySQL's `Duplicate entry '<id>-<destination>'`. The longest id that fits wins
 * (an id may be a prefix of another).
 */
export function duplicatedId(messageIds: readonly string[], error: unknown): string | undefined {
  const e = error as { detail?: unknown; message?: unknown; driverError?: { detail?: unknown; message?: unknown } };
  const text = [e?.detail, e?.driverError?.detail, e?.message, e?.driverError?.message].map(String).join('\n');
  const named = (id: string) => [`=(${id})`, `=(${id}, `, `'${id}'`, `'${id}-`].some((form) => text.includes(form));
  return messageIds
    .filter(named)
    .sort((a, b) => b.length - a.length)
    .at(0);
}
