import { v7 as uuidv7 } from 'uuid';

/** A new message id: a UUIDv7, so ids sort by creation time. */
export function newMessageId(): string {
  return uuidv7();
}
