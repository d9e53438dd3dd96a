import type { ValueTransformer } from 'typeorm';

/**
 * Times are stored as epoch milliseconds (BIGINT) on every database: one type, no time-zone conversions, and
 * arithmetic on the database clock in plain SQL. Entities see them as `Date`.
 */
export const epochMsTransformer: ValueTransformer = {
  to: (value: Date | number | null | undefined) =>
    value === null || value === undefined ? value : value instanceof Date ? value.getTime() : value,
  from: (value: string | number | null) => (value === null || value === undefined ? null : new Date(Number(value))),
};

/** Like `epochMsTransformer`, for a NOT NULL column where 0 stands for "not set": read as `null`, written as 0. */
export const epochMsOrZero: ValueTransformer = {
  to: (value: Date | number | null | undefined) =>
    value === undefined ? value : value === null ? 0 : value instanceof Date ? value.getTime() : value,
  from: (value: string | number | null) =>
    value === null || value === undefined || Number(value) === 0 ? null : new Date(Number(value)),
};
