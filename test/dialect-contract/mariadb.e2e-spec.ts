import { DATABASE_LABEL, servicesOf } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import { useDialectSubject } from './contract-subject';
import { dialectContract } from './dialect-contract';

describeWith(servicesOf('mariadb'), `OutboxDialect contract on ${DATABASE_LABEL.mariadb}`, () => {
  dialectContract(useDialectSubject('mariadb'));
});
