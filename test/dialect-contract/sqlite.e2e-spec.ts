import { DATABASE_LABEL, servicesOf } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import { useDialectSubject } from './contract-subject';
import { dialectContract } from './dialect-contract';

describeWith(servicesOf('sqlite'), `OutboxDialect contract on ${DATABASE_LABEL.sqlite}`, () => {
  // One `it` per named check of the contract; each check asserts the dialect's promise and throws on a violation.
  dialectContract(useDialectSubject('sqlite'));
});
