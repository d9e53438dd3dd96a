import request from 'supertest';
import { DATABASE_LABEL } from './helpers/databases';
import { useEmbeddedSample } from './helpers/embedded-sample';
import { waitFor } from './helpers/ports';

/** Reads one sample of a Prometheus text exposition: the value of `name` whose labels contain every given pair. */
function sampleOf(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

/** The sample serves the outbox's metrics as Prometheus text at GET /metrics (embedded defaults: SQLite + TCP). */
describe(`Sample shop: Prometheus metrics at /metrics on ${DATABASE_LABEL.sqlite} + TCP`, () => {
  const app = useEmbeddedSample();
  const http = () => request(app().getHttpServer());
  const scrape = async () => (await http().get('/metrics').expect(200)).text;

  it('moves with the work: a placed order is one published OrderPlaced and one executed idempotent request', async () => {
    const before = await scrape();
    const published = { messaging_destination_name: 'OrderPlaced' };
    expect(sampleOf(before, 'messaging_client_sent_messages_total', published) ?? 0).toBe(0);
    expect(sampleOf(before, 'outbox_backlog_pending')).toBe(0);

    await http()
      .post('/orders')
      .set('Idempotency-Key', 'metrics-order-1')
      .send({ customerId: 'c-metrics', reference: 'r-metrics', amount: 700 })
      .expect(201);

    let text = '';
    await waitFor(async () => {
      text = await scrape();
      return sampleOf(text, 'messaging_client_sent_messages_total', published) === 1;
    }, 'the OrderPlaced publish counted');
    const executed = { outbox_idempotency_outcome: 'executed', outbox_idempotency_kind: 'http' };
    expect(sampleOf(text, 'outbox_idempotency_requests_total', executed)).toBe(1);
    expect(sampleOf(text, 'outbox_backlog_dead')).toBe(0);
  });
});
