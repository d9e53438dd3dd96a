import { DATABASE_LABEL, servicesOf } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import { useDialectSubject } from './contract-subject';
import { dialectContract } from './dialect-contract';

describeWith(servicesOf('postgres'), `OutboxDialect contract on ${DATABASE_LABEL.postgres}`, () => {
  dialectContract(useDialectSubject('postgres'));
});
