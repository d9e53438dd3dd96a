import { ClientRMQ, RmqRecord } from '@nestjs/microservices';

/** While `on`, the broker path refuses every message whose payload has `poison: true`. */
export const poisonSwitch = { on: true, refused: 0 };

/**
 * A real RabbitMQ client that refuses to publish poisoned payloads while `poisonSwitch.on` (a message the broker
 * path always rejects: too large, bad routing, a schema the gateway refuses …). Everything else goes through.
 */
export class PoisonAwareClientRMQ extends ClientRMQ {
  protected override dispatchEvent(packet: { pattern: unknown; data: unknown }): Promise<any> {
    const data = packet.data instanceof RmqRecord ? packet.data.data : packet.data;
    if (poisonSwitch.on && (data as { poison?: boolean } | undefined)?.poison === true) {
      poisonSwitch.refused++;
      return Promise.reject(new Error('broker refused the poisoned message (simulated)'));
    }
    return super.dispatchEvent(packet);
  }
}
