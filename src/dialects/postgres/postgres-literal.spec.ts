import { Client } from 'pg';
import { pgLiteral } from './postgres-literal';

describe('pgLiteral', () => {
  const client = new Client();

  it.each([
    '',
    'IdempotentConsumer.on',
    '2f1c4c1e-6a4e-4b8e-9a53-1d1f0f3f3e7a',
    'a'.repeat(64),
    "it's",
    "''",
    'back\\slash',
    "both ' and \\",
    'ünïcødé ✓ \u0000 nul',
    'line\nbreak',
  ])('writes %j as the driver would', (text) => {
    expect(pgLiteral(client, text)).toBe(client.escapeLiteral(text));
  });
});
