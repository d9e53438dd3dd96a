import { BadRequestException, ValidationError, ValidationPipe } from '@nestjs/common';

/** Validates request bodies against their DTO classes; unknown fields are refused. Errors become problem+json. */
export function sampleValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    transform: true,
    exceptionFactory: (errors: ValidationError[]) => {
      const messages = errors.flatMap((e) => Object.values(e.constraints ?? { invalid: `${e.property} is invalid` }));
      return new BadRequestException({
        type: 'about:blank',
        title: 'Invalid request body',
        detail: `${messages.join('; ')}. Fix the body and send it again (with the same Idempotency-Key: nothing was recorded).`,
        errors: messages,
      });
    },
  });
}
