import { BrokerPace, BrokerPaceReport } from './broker-pace';

describe('BrokerPace', () => {
  it('halves the batch per batch with a late confirm (to a sixteenth at least) and doubles it back, reporting once each way', () => {
    const reports: BrokerPaceReport[] = [];
    const pace = new BrokerPace({ batchSize: 500, publishTimeout: 10, maxConfirmWait: 100 }, (r) => reports.push(r));
    expect(pace.slow).toBe(false);
    pace.confirmLate();
    pace.confirmLate();
    expect(pace.slow).toBe(true);
    expect(reports).toEqual([{ slow: true, batchSize: 250 }]);
    const sizes: number[] = [];
    for (let i = 0; i < 6; i++) {
      pace.batchDone(true, 10);
      sizes.push(pace.batchSize);
    }
    expect(sizes).toEqual([250, 125, 62, 32, 32, 32]);
    pace.batchDone(false, 0); // nothing confirmed: no evidence either way
    expect(pace.batchSize).toBe(32);
    for (const expected of [64, 128, 256]) {
      pace.batchDone(false, 5);
      expect(pace.batchSize).toBe(expected);
      expect(pace.slow).toBe(true);
    }
    pace.batchDone(false, 5);
    expect(pace.batchSize).toBe(500);
    expect(pace.slow).toBe(false);
    expect(reports).toHaveLength(2);
    expect(reports[1]).toMatchObject({ slow: false, batchSize: 500 });
  });

  it('keeps a batch of 1 at 1', () => {
    const pace = new BrokerPace({ batchSize: 1, publishTimeout: 10, maxConfirmWait: 100 }, () => undefined);
    pace.confirmLate();
    pace.batchDone(true, 1);
    expect(pace.batchSize).toBe(1);
  });
});
